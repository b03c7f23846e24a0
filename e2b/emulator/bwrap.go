package emulator

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Sandbox processes are real processes isolated with bubblewrap, as the processes of one VM:
//
//   - each sandbox has one bwrap of its own (its init), started with its first process and ending with the
//     sandbox: every namespace is new (--unshare-all), so the sandbox has its own network (loopback only, shared
//     by all its processes, as in one VM: a server started by one command is reachable at 127.0.0.1 from the
//     next; its one way out is the egress proxy's socket, bound at /run/e2b-egress: see egress.go), its own pids
//     (the pids envd reports are the sandbox's, and kill inside the sandbox reaches them), and its own
//     filesystem view;
//   - the host's /usr (and the /bin, /sbin, /lib* beside it) and /etc are bound read-only; /etc/passwd and
//     /etc/group are replaced by the sandbox's own (root, and user with uid 1000), so that whoami says "user";
//     when the emulator runs as root, /etc files that only root may read (shadow, private keys) are masked;
//   - the sandbox's directories are bound read-write: <Dir>/home on /home/user, <Dir>/tmp on /tmp and
//     <Dir>/root on /root; nothing else of the host is visible;
//   - each process enters the init's namespaces with nsenter (util-linux), as a plain child of envd would be
//     started: no new session, no new process group inside the sandbox. A background job it leaves behind is
//     reparented to the init and goes on running, holding the command's pipes as it would on E2B;
//   - the sandbox's user namespace maps uid 1000 ("user") to the emulator's own uid; a root process gets a user
//     namespace of its own inside it (unshare -r) in which it is uid 0. Files therefore belong to the
//     emulator's user on the host whoever wrote them, and every sandbox user can read and write what the
//     emulator wrote through /files, with no chown. The filesystem RPC reports such files as owned by "user".
//     Unlike E2B, the two users are one on the host, so they may signal each other's processes.
//
// Signals reach one process, as envd's do: SendSignal and the Connect-Timeout-Ms deadline signal the process
// envd started (found on the host through nsenter, and held by a pidfd), never its group. Pausing stops every
// process of the sandbox (kill -STOP -1 inside it), and stopping the sandbox kills its init, which ends all.

// bwrapPath is where Debian's bubblewrap package installs bwrap.
const bwrapPath = "/usr/bin/bwrap"

// sandboxPATH is the PATH envd gives processes in E2B's templates.
const sandboxPATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// sandboxUser is a Linux user of the emulated sandboxes.
type sandboxUser struct {
	Name     string
	UID, GID int
	Home     string
}

// lookupSandboxUser knows the two users of E2B's base template.
func lookupSandboxUser(name string) (sandboxUser, bool) {
	switch name {
	case "root":
		return sandboxUser{Name: "root", UID: 0, GID: 0, Home: "/root"}, true
	case "user":
		return sandboxUser{Name: "user", UID: 1000, GID: 1000, Home: "/home/user"}, true
	}
	return sandboxUser{}, false
}

const sandboxPasswd = "root:x:0:0:root:/root:/bin/bash\n" +
	"user:x:1000:1000::/home/user:/bin/bash\n" +
	"nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n"

const sandboxGroup = "root:x:0:\nuser:x:1000:\nnogroup:x:65534:\n"

// sandboxMount is a directory of the sandbox that lives on the host: at is its path inside, sub its directory
// under the sandbox's Dir.
type sandboxMount struct {
	at, sub string
	perm    fs.FileMode
}

// sandboxMounts are the writable parts of a sandbox.
func sandboxMounts() [3]sandboxMount {
	return [3]sandboxMount{
		{at: "/home/user", sub: "home", perm: 0o755},
		{at: "/root", sub: "root", perm: 0o700},
		{at: "/tmp", sub: "tmp", perm: 0o777 | fs.ModeSticky},
	}
}

// prepareSandboxDirs completes a sandbox's directories under dir: a sandbox made before /root existed (or by
// hand, in tests) gets what is missing; a missing home is seeded as a new sandbox's is.
func prepareSandboxDirs(dir string) error {
	if dir == "" {
		return errors.New("emulator: sandbox has no directory")
	}
	// The sandbox's own directory must exist: one removed with its sandbox is never made again.
	if _, err := os.Lstat(dir); err != nil {
		return err
	}
	if _, err := os.Lstat(filepath.Join(dir, "home")); errors.Is(err, fs.ErrNotExist) {
		if err := seedSandboxDir(dir); err != nil {
			return err
		}
	}
	for _, m := range sandboxMounts() {
		p := filepath.Join(dir, m.sub)
		_, err := os.Lstat(p)
		if err == nil {
			continue
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		if err := os.MkdirAll(p, 0o755); err != nil {
			return err
		}
		if err := os.Chmod(p, m.perm); err != nil {
			return err
		}
	}
	return nil
}

// isolation describes how this host runs sandbox processes.
type isolation struct {
	bwrap   string
	nsenter string // util-linux's, to start processes in a sandbox's namespaces
	// err says why processes cannot be isolated here (no bwrap, or user namespaces are not allowed).
	err error
	// systemArgs bind the host's system directories but /etc (computed once: they do not change under a test;
	// /etc, which other programs change at any time, is listed anew for each sandbox by etcArgs).
	systemArgs []string
}

// probeIsolation finds bwrap and checks that it can make a sandbox on this host, so that a missing package or
// disabled user namespaces are reported once, clearly, instead of as every command failing.
func probeIsolation() isolation {
	iso := isolation{bwrap: bwrapPath, systemArgs: systemBindArgs()}
	if _, err := os.Stat(bwrapPath); err != nil {
		p, lerr := exec.LookPath("bwrap")
		if lerr != nil {
			iso.err = fmt.Errorf("emulator: bubblewrap (%s) is not installed; install the bubblewrap package", bwrapPath)
			return iso
		}
		iso.bwrap = p
	}
	for _, tool := range []string{"nsenter", "unshare"} {
		p, err := exec.LookPath(tool)
		if err != nil {
			iso.err = fmt.Errorf("emulator: %s is not installed; install the util-linux package", tool)
			return iso
		}
		if tool == "nsenter" {
			iso.nsenter = p
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	args := append([]string{"--unshare-all", "--unshare-user", "--uid", "1000", "--gid", "1000",
		"--die-with-parent"}, iso.systemArgs...)
	args = append(args, etcArgs()...)
	args = append(args, "--proc", "/proc", "--dev", "/dev", "--", "/bin/sh", "-c", "exit 0")
	cmd := exec.CommandContext(ctx, iso.bwrap, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(stderr.String())
		if msg == "" {
			msg = err.Error()
		}
		iso.err = fmt.Errorf("emulator: bubblewrap cannot create a sandbox on this host (%s); user "+
			"namespaces may be disabled", msg)
	}
	return iso
}

// systemBindArgs binds the host's system directories read-only, keeping usr-merge symlinks as symlinks. /etc is
// etcArgs'.
func systemBindArgs() []string {
	args := []string{"--ro-bind", "/usr", "/usr"}
	for _, d := range []string{"/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"} {
		fi, err := os.Lstat(d)
		switch {
		case err != nil:
		case fi.Mode()&fs.ModeSymlink != 0:
			if target, err := os.Readlink(d); err == nil {
				args = append(args, "--symlink", target, d)
			}
		case fi.IsDir():
			args = append(args, "--ro-bind", d, d)
		}
	}
	return args
}

// etcArgs give a sandbox the host's /etc, read-only, with inside bound the files of into (pairs of --ro-bind-data
// FD and path: /etc/passwd, /etc/group).
//
// As root, the emulator hides what only root may read (shadow files, private keys): a sandbox user maps to the
// emulator's uid, which then owns those files. /etc is then a tmpfs made of the host's entries, listed now: each
// readable one bound (--ro-bind-try, which skips an entry gone by the time bwrap binds it), each private file
// covered by /dev/null and each private directory left empty, and the tmpfs made read-only last. Other programs
// change /etc at any time (useradd adds and removes lock and backup files): an entry that vanishes between the
// listing and bwrap's mounts is skipped, and one that appears is not there for this sandbox. Masking inside a
// read-only bind of the whole /etc instead fails the sandbox's start when a masked file has vanished, since bwrap
// cannot make a mount point for it there.
func etcArgs(into ...string) []string {
	if os.Geteuid() != 0 {
		return append([]string{"--ro-bind", "/etc", "/etc"}, into...)
	}
	args := []string{"--perms", "0755", "--tmpfs", "/etc"}
	entries, _ := etcEntries("/etc", 0)
	args = append(args, entries...)
	args = append(args, into...)
	return append(args, "--remount-ro", "/etc")
}

// etcMaxDepth is how deep under /etc private entries are looked for; deeper directories are bound whole.
const etcMaxDepth = 3

// etcEntries are the bwrap arguments that rebuild dir (under /etc, depth levels below it) in the sandbox, and
// whether it holds a private entry (so that it cannot be bound whole). An entry that cannot be read is one that
// vanished while it was listed: it is left out.
func etcEntries(dir string, depth int) (args []string, private bool) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, false
	}
	for _, de := range entries {
		p := filepath.Join(dir, de.Name())
		fi, err := os.Lstat(p)
		if err != nil {
			continue
		}
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			if target, err := os.Readlink(p); err == nil {
				args = append(args, "--symlink", target, p)
			}
		case fi.Mode().Perm()&0o004 == 0 && fi.IsDir():
			private = true
			args = append(args, "--dir", p)
		case fi.Mode().Perm()&0o004 == 0:
			private = true
			args = append(args, "--ro-bind", "/dev/null", p)
		case fi.IsDir() && depth < etcMaxDepth:
			if sub, hides := etcEntries(p, depth+1); hides {
				private = true
				args = append(append(args, "--dir", p), sub...)
				continue
			}
			args = append(args, "--ro-bind-try", p, p)
		default:
			args = append(args, "--ro-bind-try", p, p)
		}
	}
	return args, private
}

// initScript keeps a sandbox's namespaces alive: it says it is ready (bwrap reports its pid before the
// namespaces are complete, so the emulator waits for this), then waits for its stdin, a pipe the emulator holds,
// to close. When it ends, bwrap (the sandbox's pid 1) ends and the kernel kills every process left in the
// sandbox, so a sandbox never outlives its emulator.
const initScript = `echo ready; exec 1>&-; read -r _; exit 0`

// initCommand builds a sandbox's init. The returned files are the child's ends of pipes that carry the
// generated /etc files and bwrap's info (the host pid of the sandbox's pid 1); the caller closes them once the
// init has started.
func (iso *isolation) initCommand(dir,
	egressDir string) (cmd *exec.Cmd, info *os.File, childFiles []*os.File, err error) {
	if iso.err != nil {
		return nil, nil, nil, iso.err
	}
	var extra []*os.File
	closeAll := func() {
		for _, f := range extra {
			f.Close()
		}
	}
	data := func(content string) (string, error) {
		r, w, err := os.Pipe()
		if err != nil {
			return "", err
		}
		// The content is far smaller than a pipe's buffer, so it is written whole before bwrap starts.
		_, err = w.WriteString(content)
		w.Close()
		if err != nil {
			r.Close()
			return "", err
		}
		extra = append(extra, r)
		return strconv.Itoa(2 + len(extra)), nil
	}
	passwdFD, err := data(sandboxPasswd)
	if err != nil {
		closeAll()
		return nil, nil, nil, err
	}
	groupFD, err := data(sandboxGroup)
	if err != nil {
		closeAll()
		return nil, nil, nil, err
	}
	infoR, infoW, err := os.Pipe()
	if err != nil {
		closeAll()
		return nil, nil, nil, err
	}
	extra = append(extra, infoW)
	infoFD := strconv.Itoa(2 + len(extra))
	args := []string{"--unshare-all", "--unshare-user", "--uid", "1000", "--gid", "1000", "--hostname", "e2b",
		"--info-fd", infoFD}
	args = append(args, iso.systemArgs...)
	args = append(args, etcArgs("--ro-bind-data", passwdFD, "/etc/passwd", "--ro-bind-data", groupFD, "/etc/group")...)
	for _, m := range sandboxMounts() {
		args = append(args, "--bind", filepath.Join(dir, m.sub), m.at)
	}
	if egressDir != "" {
		args = append(args, "--ro-bind", egressDir, egressSocketDir)
	}
	args = append(args, "--proc", "/proc", "--dev", "/dev", "--chdir", "/", "--", "/bin/sh", "-c", initScript)
	cmd = exec.Command(iso.bwrap, args...)
	cmd.Env = []string{"PATH=" + sandboxPATH}
	cmd.ExtraFiles = extra
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	return cmd, infoR, extra, nil
}

// readInitPID reads the host pid of a sandbox's pid 1 from bwrap's --info-fd ({"child-pid": N, ...}).
func readInitPID(info *os.File) (int, error) {
	var v struct {
		ChildPID int `json:"child-pid"`
	}
	if err := json.NewDecoder(info).Decode(&v); err != nil {
		return 0, fmt.Errorf("emulator: reading bwrap's info: %w", err)
	}
	if v.ChildPID <= 0 {
		return 0, errors.New("emulator: bwrap reported no pid")
	}
	return v.ChildPID, nil
}

// procSpec is one process to run in a sandbox.
type procSpec struct {
	initPID int // host pid of the sandbox's init
	user    sandboxUser
	cwd     string // inside the sandbox
	env     []string
	cmd     string
	args    []string
	// tty: the process's stdin is a terminal, which becomes its controlling terminal in a session of its own, as
	// envd starts a PTY process.
	tty bool
}

// envdWrapper is how envd runs every command (minus its OOM-score step): through sh and nice, so that a command
// that cannot be found fails as it does in E2B (nice: '<cmd>': No such file or directory, exit status 127). Before
// that it reports its pid in the sandbox on fd 3 (exec keeps the pid), waits on fd 4 for the emulator's "go" (see
// handshake) and moves to the working directory ($1).
const envdWrapper = envdWrapperStart + `/usr/bin/nice -n 0 "$@"`

// envdTTYWrapper is envdWrapper for a process on a terminal: it first becomes the leader of a session of its own
// with its stdin as the controlling terminal (setsid keeps the pid: the wrapper leads no process group).
const envdTTYWrapper = envdWrapperStart + `setsid --ctty /usr/bin/nice -n 0 "$@"`

// envdWrapperStart is what both wrappers do before they run the command.
const envdWrapperStart = `echo $$ >&3; exec 3>&-; read -r go <&4; exec 4<&-; [ "$go" = go ] || exit 1; ` +
	`cd -- "$1" || exit 1; shift; exec `

// handshake holds a process entering the sandbox until the emulator has a hold on it: the wrapper writes its pid
// in the sandbox on one pipe, then waits on the other for "go" before it runs the command. Without the wait a
// command that ends at once (true, ps | wc) could be gone, reaped by nsenter, before its host process is found.
type handshake struct {
	pidR, pidW *os.File // the wrapper's pid in the sandbox, one line
	goR, goW   *os.File // "go" runs the command; anything else, or the pipe closed, makes the wrapper exit
}

func newHandshake() (*handshake, error) {
	pidR, pidW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	goR, goW, err := os.Pipe()
	if err != nil {
		pidR.Close()
		pidW.Close()
		return nil, err
	}
	return &handshake{pidR: pidR, pidW: pidW, goR: goR, goW: goW}, nil
}

// started closes the ends the child took, once it has been started.
func (h *handshake) started() {
	h.pidW.Close()
	h.goR.Close()
}

// proceed lets the wrapper run its command (run) or makes it exit without running anything.
func (h *handshake) proceed(run bool) {
	if run {
		_, _ = h.goW.WriteString("go\n")
	}
	h.goW.Close()
}

// close closes every end this side still holds (closing one twice is harmless).
func (h *handshake) close() {
	for _, f := range []*os.File{h.pidR, h.pidW, h.goR, h.goW} {
		f.Close()
	}
}

// command builds the command that runs ps in its sandbox. pidR is the read end of the pipe on which the process
// reports its pid in the sandbox; pidW is the child's end, which the caller closes once the process has started.
func (iso *isolation) command(ps procSpec) (*exec.Cmd, *handshake, error) {
	if iso.err != nil {
		return nil, nil, iso.err
	}
	h, err := newHandshake()
	if err != nil {
		return nil, nil, err
	}
	args := []string{"--target", strconv.Itoa(ps.initPID), "--user", "--mount", "--net", "--pid", "--uts", "--ipc",
		"--root", "--setuid", "1000", "--setgid", "1000", "--"}
	if ps.user.UID == 0 {
		args = append(args, "unshare", "--map-root-user", "--")
	}
	wrapper := envdWrapper
	if ps.tty {
		wrapper = envdTTYWrapper
	}
	args = append(args, "/bin/sh", "-c", wrapper, "e2btest", ps.cwd, ps.cmd)
	args = append(args, ps.args...)
	cmd := exec.Command(iso.nsenter, args...)
	cmd.Env = ps.env
	cmd.ExtraFiles = []*os.File{h.pidW, h.goR}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	return cmd, h, nil
}
