package e2b

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Shell commands as a terminal user expects them, on top of envd's process service (docs/e2b.md,
// "Processes in envd"): envd starts a command as a plain child of itself, signals only the one pid it started, and ends
// a stream only when every holder of the command's stdout and stderr has closed them. So every command here runs as the
// leader of a session of its own (setsid), which its whole process tree shares: stopping it signals the process group,
// from a short command run through envd. And the shell that runs the user's command marks its own exit on stdout and
// stderr, so that a command leaving a job in the background returns when its shell exits, while the job (which still
// holds the pipes) goes on.

// commandShell is the one shell of a command of RunCommand: bash -l -c, as E2B's SDKs run a command, whose script
// sets up what follows and then runs the user's command ($1) in the same shell with eval, on the script's first
// line (so that the shell's own messages name the lines a plain bash -l -c would, and $$, $PPID and SHLVL are what
// they would be). Its EXIT trap ($4, commandExit) writes the exit marker ($2, then the exit code and a newline) on
// stdout and on stderr; the two streams are read apart, so each says where it ends. A SIGTERM (a stop) makes the
// shell exit with 143, the code of a shell killed by it, through that trap. Where the trap cannot run (the command
// replaced the shell with exec, set an EXIT trap of its own, or was killed by SIGKILL) the stream's own end says
// how it ended, as it does for the SDKs.
//
// With a log directory ($3), the command's stdout and stderr also go, from their first byte, to its log file there
// (BackgroundFiles, named by the shell's pid), through a tee each, and its command line to the command file and its
// exit code to the exit file, all written in the sandbox by the command's own shell: whoever reads the stream may
// go away (a server killed or restarted), the log does not. mkdir runs only for a missing directory; the rest are
// shell builtins. The tees ignore SIGTERM, so that a stopped command's last words reach the log (they end with their
// input). They also hold the writing end of a pipe of their own, the end pipe, whose reading end the shell keeps
// (r) to learn, without polling, when they have exited: a here-string is such a pipe in bash 5.1 and later, whose
// other end /proc/self/fd opens (an older bash gets one from a process substitution). envd's pipes stay open in
// the shell on descriptors of bash's choosing (10 and up, which scripts leave alone), for the marker.
var commandShell = strings.Join([]string{
	`exec {o}>&1 {e}>&2 2>/dev/null`,
	`l= t= r= y=`,
	`if [ -n "$3" ] && { [ -d "$3" ] || mkdir -p -- "$3"; } && : >"$3/bg-$$.exit" && printf '%s' "$1" >"$3/bg-$$.cmd" && : >"$3/bg-$$.log"; then ` +
		`{ exec {r}<<<'' && [ -p "/proc/self/fd/$r" ]; } || exec {r}< <(:); exec {y}>"/proc/self/fd/$r"; ` +
		`exec {p}> >(trap '' TERM; exec tee -a -- "$3/bg-$$.log" >&$o {o}>&- {e}>&-); t=$!; ` +
		`exec {q}> >(trap '' TERM; exec tee -a -- "$3/bg-$$.log" >&$e {o}>&- {e}>&- {p}>&-); t="$t $!"; ` +
		`exec >&$p 2>&$q {p}>&- {q}>&-; [ -z "$y" ] || exec {y}>&-; l=$3; ` +
		`else exec 2>&$e; fi`,
	`printf -v x 'm=%q d=%q t=%q o=%q e=%q r=%q' "$2" "$l" "$t" "$o" "$e" "$r"`,
	`trap -- "c=\$?; $x; $4" EXIT`,
	`trap 'exit 143' TERM`,
	`c=$1`,
	`set --`,
	`unset -v l t x o e p q r y`,
	`eval "unset -v c; $c"`,
}, "; ")

// commandExit is commandShell's EXIT trap, run with c, m, d, t, o, e and r set (the exit code, the marker, the log
// directory, the tees' pids, envd's stdout and stderr, the tees' end pipe). The marker must follow all of the
// command's output on the stream, so it first closes the shell's ends of the tees' pipes and waits for each tee to
// have passed on what it was given: it has exited, or sleeps reading an empty pipe that a job the command left
// behind still holds, which /proc shows. A wait for their exit alone would last as long as such a job. So it looks
// at /proc, and between looks reads the end pipe for up to 10 ms: only the tees hold its writing end, so the read
// returns the moment the last of them exits, and the timeout is the only sleep a shell has without a process. It
// gives up after about 2 s, which only a tee whose writes envd does not take reaches. A SIGTERM meanwhile is
// ignored: the exit code is known.
const commandExit = `set +eu; trap : TERM; exec >&- 2>&-
i=0; while [ -n "$t" ] && [ $i -lt 200 ]; do n=0
for p in $t; do read -r _ _ s _ <"/proc/$p/stat" && [ "$s" != Z ] || continue
w=; [ "$s" = S ] && read -r w <"/proc/$p/wchan"; case $w in *pipe_read|pipe_wait) ;; *) n=1 ;; esac; done
[ $n = 1 ] || break; i=$((i+1)); read -r -t 0.01 -u "$r" _; [ $? != 1 ] || break; done
[ -z "$d" ] || printf '%d\n' "$c" >"$d/bg-$$.exit"
printf '%s%d\n' "$m" "$c" >&$o; printf '%s%d\n' "$m" "$c" >&$e`

// backgroundWrapper starts the user's command ($1) detached from envd's output pipes: its stdout and stderr go to
// a log file named by the wrapper's pid in the directory $2 (BackgroundFiles), stdin stays envd's (a pipe for
// SendStdin, or the terminal of a PTY), and once the redirection is in place the ready marker ($3) is written on
// the original stdout, which is then closed. The command line goes to the command file, so that what ran can be
// named after it ended. When the command ends the wrapper writes its exit code to the exit file, so that how it
// ended can be read from the sandbox by anyone, later; SIGTERM is caught (the command, whose process group gets it
// too, is not spared by that), so a stopped command has an exit file as well.
const backgroundWrapper = `d=$2; mkdir -p -- "$d" && rm -f -- "$d/bg-$$.exit" && printf '%s' "$1" >"$d/bg-$$.cmd" && exec 3>&1 && exec >"$d/bg-$$.log" 2>&1 || exit 126
printf '%s\n' "$3" >&3; exec 3>&-; trap : TERM; /bin/bash -l -c "$1"; c=$?
printf '%d\n' "$c" >"$d/bg-$$.exit"`

// BackgroundFiles are the log file (stdout and stderr) and the exit file (the exit code and a newline, once it
// ended) of the background command pid whose BackgroundOptions.LogDir was dir.
func BackgroundFiles(dir string, pid uint32) (log, exit string) {
	base := backgroundBase(dir, pid)
	return base + ".log", base + ".exit"
}

// CommandFile is the file that holds the command line of the background command pid whose
// BackgroundOptions.LogDir was dir (written when it starts, without a newline).
func CommandFile(dir string, pid uint32) string { return backgroundBase(dir, pid) + ".cmd" }

func backgroundBase(dir string, pid uint32) string {
	return fmt.Sprintf("%s/bg-%d", strings.TrimSuffix(dir, "/"), pid)
}

// treeSignaller signals the process group $1: SIGTERM first when $2 (tenths of a second to wait for the group to
// go) is above zero, then SIGKILL to whatever is left. It prints how the group ended: gone (nothing to signal),
// TERM or KILL.
const treeSignaller = `g=$1; n=$2
kill -0 -- -"$g" 2>/dev/null || kill -0 -- "$g" 2>/dev/null || { echo gone; exit 0; }
if [ "$n" -gt 0 ]; then
  kill -TERM -- -"$g" 2>/dev/null || kill -TERM -- "$g" 2>/dev/null
  i=0
  while [ $i -lt "$n" ]; do
    kill -0 -- -"$g" 2>/dev/null || kill -0 -- "$g" 2>/dev/null || { echo TERM; exit 0; }
    sleep 0.1; i=$((i+1))
  done
fi
kill -KILL -- -"$g" 2>/dev/null; kill -KILL -- "$g" 2>/dev/null; echo KILL`

// wrapperArg0 is $0 of the wrappers, as a process listing shows it.
const wrapperArg0 = "e2b-mcp"

// CommandOptions are the options of RunCommand.
type CommandOptions struct {
	Cwd  string
	Envs map[string]string
	// Timeout kills the command and everything it started when it runs out; 0 = no limit.
	Timeout time.Duration
	// OnStart is called with the pid as soon as envd reports it.
	OnStart func(pid uint32)
	// OnOutput is called with each stdout/stderr chunk as it arrives (data valid only during the call).
	OnOutput func(kind EventKind, data []byte)
	// Tag names the process in envd's process list, where ListBackground finds it while it runs.
	Tag string
	// LogDir, when set, is the directory in the sandbox (made if missing) where the command's own wrapper writes
	// its output (stdout and stderr, as they come, beside OnOutput's copy), its command line and its exit code, in
	// the files a background command has (BackgroundFiles, CommandFile): they outlive the caller, who may remove
	// them once it has what it wants of them. Without a log (the directory cannot be made) the command still runs.
	LogDir string
}

// CommandResult is how a command ended.
type CommandResult struct {
	// PID is the pid envd reported; it leads the process group of everything the command started.
	PID uint32
	ProcessEnd
	// TimedOut is true when the command was killed because Timeout ran out.
	TimedOut bool
	// Unmarked is true when the end is envd's rather than the shell's own exit marker: the shell was killed
	// outright, replaced itself (exec), or set an EXIT trap of its own. Such a shell wrote no exit file.
	Unmarked bool
}

// defaultKillGrace bounds each step of stopping a command its caller gave up on: the kill of its process group,
// the kill of its pid, and the wait for the stream to end.
const defaultKillGrace = 10 * time.Second

// grace is the bound of each step of stopping a command (defaultKillGrace unless a test set killGrace).
func (e *Envd) grace() time.Duration {
	if e.killGrace > 0 {
		return e.killGrace
	}
	return defaultKillGrace
}

// timeoutSlack is how much longer than the command's own timeout envd is told to keep the stream, so that envd's
// deadline (which kills only the leader) is a last resort behind the client's kill of the whole tree.
const timeoutSlack = 2 * defaultKillGrace

// endWait is how long RunCommand waits, after the command's shell exited, for the stream to end by itself (it
// does at once unless background jobs hold the pipes): a stream that ends, rather than one cut, leaves its
// connection to envd open for the next call.
const endWait = 50 * time.Millisecond

// newMarker returns an exit marker no command prints by chance.
func newMarker() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return "\x1ee2b-mcp-exit-" + hex.EncodeToString(b[:]) + ":"
}

// markerScanner passes a stream's bytes through until the exit marker, holding back what could be its start,
// and records the exit code the marker carries. Bytes after the marker come from background jobs and are
// dropped.
type markerScanner struct {
	marker []byte
	held   []byte
	seen   bool
	code   int
}

// maxCodeLen bounds the digits of an exit code in a marker (with a sign).
const maxCodeLen = 11

// feed returns the part of data (with any held bytes before it) that belongs to the command's output.
func (m *markerScanner) feed(data []byte) []byte {
	if m.seen {
		return nil
	}
	buf := data
	if len(m.held) > 0 {
		buf = append(m.held, data...)
		m.held = nil
	}
	from := 0
	for {
		i := bytes.Index(buf[from:], m.marker)
		if i < 0 {
			break
		}
		i += from
		rest := buf[i+len(m.marker):]
		nl := bytes.IndexByte(rest, '\n')
		if nl < 0 {
			if len(rest) <= maxCodeLen && isCode(rest, true) {
				m.held = append([]byte(nil), buf[i:]...)
				return buf[:i]
			}
		} else if code, err := strconv.Atoi(string(rest[:nl])); err == nil && isCode(rest[:nl], false) {
			m.seen, m.code = true, code
			return buf[:i]
		}
		from = i + 1 // not a marker after all: ordinary output
	}
	// Hold back a tail that could be the start of the marker.
	for k := min(len(m.marker)-1, len(buf)); k > 0; k-- {
		if bytes.HasSuffix(buf, m.marker[:k]) {
			m.held = append([]byte(nil), buf[len(buf)-k:]...)
			return buf[:len(buf)-k]
		}
	}
	return buf
}

// isCode says whether b is an exit code, or (partial) the start of one.
func isCode(b []byte, partial bool) bool {
	if len(b) == 0 {
		return partial
	}
	if b[0] == '-' {
		b = b[1:]
		if len(b) == 0 {
			return partial
		}
	}
	for _, c := range b {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// flush returns what is held back when the stream ends without a marker.
func (m *markerScanner) flush() []byte {
	h := m.held
	m.held = nil
	return h
}

// RunCommand runs a command with bash -l -c, in a session of its own, and returns when its shell exits, with the
// shell's output and exit code; background jobs it started go on running. If ctx is cancelled or Timeout runs
// out, the command and everything it started are killed.
func (e *Envd) RunCommand(ctx context.Context, command string, opts CommandOptions) (CommandResult, error) {
	var (
		res      CommandResult
		mu       sync.Mutex // guards timedOut against the timer
		timedOut bool
		timer    *time.Timer
		exited   *time.Timer // cuts the stream endWait after the shell exited
		stdout   = markerScanner{marker: []byte(newMarker())}
		stderr   = markerScanner{marker: stdout.marker}
	)
	if err := ctx.Err(); err != nil {
		return res, contextError("envd Start", err)
	}
	// The stream does not end with ctx. Once the request may have reached envd, the command may be running (envd
	// runs it whatever becomes of the stream) while the start event that carries its pid is still on the way, and
	// without the pid it could not be killed. So when ctx ends, the stream is cut only once the pid is known (at
	// once if it is already), or after the kill grace if no start event comes; the command's tree is killed after.
	streamCtx, stopStream := context.WithCancel(context.WithoutCancel(ctx))
	defer stopStream()
	started := make(chan struct{}) // closed at the start event, when res.PID is set
	stopCutting := context.AfterFunc(ctx, func() {
		wait := time.NewTimer(e.grace())
		defer wait.Stop()
		select {
		case <-started:
		case <-wait.C:
		case <-streamCtx.Done():
		}
		stopStream()
	})
	defer stopCutting()
	output := func(kind EventKind, data []byte) {
		if len(data) > 0 && opts.OnOutput != nil {
			opts.OnOutput(kind, data)
		}
	}
	start := StartOptions{Process: ProcessConfig{
		Cmd: "setsid",
		Args: []string{
			"/bin/bash", "-l", "-c", commandShell, "/bin/bash", command, string(stdout.marker), opts.LogDir, commandExit,
		},
		Envs: opts.Envs,
		Cwd:  opts.Cwd,
	}, Tag: opts.Tag}
	if opts.Timeout > 0 {
		start.Timeout = opts.Timeout + timeoutSlack
	}
	end, err := e.start(streamCtx, start, func(ev ProcessEvent) error {
		switch ev.Kind {
		case EventStart:
			if res.PID != 0 {
				return errorf("envd Start", ErrBadAnswer, "a second start event (pid %d after %d)", ev.PID, res.PID)
			}
			res.PID = ev.PID
			close(started)
			if opts.OnStart != nil {
				opts.OnStart(ev.PID)
			}
			if opts.Timeout > 0 {
				timer = time.AfterFunc(opts.Timeout, func() {
					mu.Lock()
					timedOut = true
					mu.Unlock()
					e.killTree(ctx, ev.PID)
					// A process that keeps the pipes open from outside the group must not hold the call.
					time.AfterFunc(e.grace(), stopStream)
				})
			}
		case EventStdout:
			output(EventStdout, stdout.feed(ev.Data))
		case EventStderr:
			output(EventStderr, stderr.feed(ev.Data))
		}
		if stdout.seen && stderr.seen && exited == nil {
			if timer != nil {
				timer.Stop()
			}
			exited = time.AfterFunc(endWait, stopStream)
		}
		return nil
	})
	for _, t := range []*time.Timer{timer, exited} {
		if t != nil {
			t.Stop()
		}
	}
	mu.Lock()
	res.TimedOut = timedOut
	mu.Unlock()
	if stdout.seen && stderr.seen {
		// The shell exited: the end is the marker's (an end event is the wrapper's), whether the stream then ended
		// or was cut because jobs left in the background hold it open.
		res.ProcessEnd = exitEnd(stdout.code)
		return res, nil
	}
	output(EventStdout, stdout.flush())
	output(EventStderr, stderr.flush())
	var apiErr *APIError
	switch {
	case err == nil:
		res.ProcessEnd, res.Unmarked = end, true
		return res, nil
	case ctx.Err() != nil:
		if res.PID != 0 {
			// The stream is gone but the command is not: envd keeps processes whose stream closes.
			e.killTree(ctx, res.PID)
		}
		return res, contextError("envd Start", ctx.Err())
	case res.TimedOut || (opts.Timeout > 0 && errors.As(err, &apiErr) && apiErr.Code == "deadline_exceeded"):
		// Killed by the timer, or by envd's own deadline if the kill could not be made.
		res.ProcessEnd = ProcessEnd{ExitCode: -1, Status: "signal: killed", Error: "signal: killed"}
		res.TimedOut = true
		return res, nil
	}
	return res, err
}

// exitEnd is the end of a shell that exited with code, as envd would report it.
func exitEnd(code int) ProcessEnd {
	end := ProcessEnd{ExitCode: code, Exited: true, Status: "exit status " + strconv.Itoa(code)}
	if code != 0 {
		end.Error = end.Status
	}
	return end
}

// killTree kills the process group led by pid, then pid itself through envd (in case it leads no group), each
// step on a context and deadline of its own: it runs when the caller has given up, and a group kill that hangs
// (it is a command in the sandbox) must leave the fallback its whole grace. Failures are logged, not returned:
// there is nothing more a caller could do.
func (e *Envd) killTree(ctx context.Context, pid uint32) {
	step := func(do func(context.Context) error) error {
		kctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), e.grace())
		defer cancel()
		return do(kctx)
	}
	if err := step(func(kctx context.Context) error { _, err := e.SignalTree(kctx, pid, 0); return err }); err != nil {
		e.client.cfg.Logger.Debug("e2b: could not kill a command's process group", "pid", pid, "err", err)
	}
	if err := step(func(kctx context.Context) error { return e.SendSignal(kctx, pid, SIGKILL) }); err != nil &&
		!errors.Is(err, ErrNotFound) {
		e.client.cfg.Logger.Debug("e2b: could not kill an abandoned command", "pid", pid, "err", err)
	}
}

// TreeEnd says how SignalTree ended a process group.
type TreeEnd string

// How a process group ended under SignalTree.
const (
	TreeGone   TreeEnd = "gone"    // nothing was left to signal
	TreeTermed TreeEnd = "SIGTERM" // it ended within the grace after SIGTERM
	TreeKilled TreeEnd = "SIGKILL" // it was killed
)

// SignalTree stops the process group led by pid (a command of RunCommand or StartBackground and everything it
// started): with a grace above zero it sends SIGTERM and waits up to grace for the group to go, then SIGKILL to
// what is left. It runs a short command in the sandbox, since envd's SendSignal reaches one pid only.
func (e *Envd) SignalTree(ctx context.Context, pid uint32, grace time.Duration) (TreeEnd, error) {
	var out strings.Builder
	end, err := e.Start(ctx, StartOptions{
		Process: ProcessConfig{Cmd: "/bin/bash", Args: []string{"-c", treeSignaller, wrapperArg0,
			strconv.FormatUint(uint64(pid), 10), strconv.FormatInt(int64(grace/(100*time.Millisecond)), 10)}},
	}, func(ev ProcessEvent) {
		if ev.Kind == EventStdout && out.Len() < 64 {
			out.Write(ev.Data)
		}
	})
	if err != nil {
		return "", err
	}
	switch strings.TrimSpace(out.String()) {
	case "gone":
		return TreeGone, nil
	case "TERM":
		return TreeTermed, nil
	case "KILL":
		return TreeKilled, nil
	}
	return "", errorf(fmt.Sprintf("stopping process group %d", pid), ErrBadAnswer, "unexpected answer %q (%s)",
		out.String(), end.Status)
}

// BackgroundOptions are the options of StartBackground.
type BackgroundOptions struct {
	Cwd  string
	Envs map[string]string
	// LogDir is the directory in the sandbox (made if missing) of the command's log and exit files
	// (BackgroundFiles).
	LogDir string
	// Tag names the process in envd's process list (ListBackground finds it by a prefix of it).
	Tag string
	// PTY runs the command on a terminal of envd's (its stdin and controlling terminal; its output still goes to
	// the log), for programs that want one: input then goes through SendPTYInput rather than SendStdin.
	PTY bool
}

// BackgroundProcess is a process started by StartBackground, or by RunCommand with a tag, that still runs.
type BackgroundProcess struct {
	PID     uint32
	Tag     string
	Command string
	Cwd     string
	// Background is true for a command of StartBackground, false for one of RunCommand (whose output goes to
	// its caller's stream, and whose stdin is /dev/null).
	Background bool
	// PTY is true for a command started on a terminal (BackgroundOptions.PTY).
	PTY bool
}

// defaultPTYSize is the terminal a PTY command gets: the size E2B's SDKs default to.
var defaultPTYSize = PTYSize{Cols: 80, Rows: 24}

// StartBackground starts a command (bash -l -c) that outlives the call and the client: in a session of its own,
// with its output written to its log file (BackgroundFiles) and its stdin open for input. It returns the pid once
// the command runs (its output already going to the log); stop it with SignalTree.
func (e *Envd) StartBackground(ctx context.Context, command string, opts BackgroundOptions) (uint32, error) {
	if opts.LogDir == "" {
		return 0, errorf("StartBackground", ErrInvalidArgument, "no log directory")
	}
	ready := []byte(newMarker())
	streamCtx, stop := context.WithCancel(ctx)
	defer stop()
	var pid uint32
	var stdout, stderr bytes.Buffer
	// envd makes a PTY command the leader of a session of its own, so it needs no setsid (which would fork, the
	// pid envd reports leaving at once with the terminal).
	proc := ProcessConfig{
		Cmd:  "setsid",
		Args: []string{"/bin/bash", "-c", backgroundWrapper, wrapperArg0, command, opts.LogDir, string(ready)},
		Envs: opts.Envs,
		Cwd:  opts.Cwd,
	}
	start := StartOptions{Process: proc, Tag: opts.Tag, Stdin: true}
	if opts.PTY {
		start.Process.Cmd, start.Process.Args = "/bin/bash", proc.Args[1:]
		start.Stdin, start.PTY = false, &defaultPTYSize
	}
	_, err := e.Start(streamCtx, start, func(ev ProcessEvent) {
		switch ev.Kind {
		case EventStart:
			pid = ev.PID
		case EventStdout, EventPTY:
			if stdout.Len() < 4096 {
				stdout.Write(ev.Data)
			}
			if bytes.Contains(stdout.Bytes(), ready) {
				stop() // the command runs detached; closing the stream leaves it running
			}
		case EventStderr:
			if stderr.Len() < 4096 {
				stderr.Write(ev.Data)
			}
		}
	})
	if bytes.Contains(stdout.Bytes(), ready) && ctx.Err() == nil {
		return pid, nil
	}
	if err != nil {
		return pid, err
	}
	msg := strings.TrimSpace(stderr.String())
	if msg == "" && opts.PTY {
		msg = strings.TrimSpace(stdout.String()) // a terminal has one stream
	}
	if msg == "" {
		msg = "it exited before it could start"
	}
	return pid, errorf("", ErrInvalidArgument, "the background command could not start: %s", msg)
}

// ListBackground lists the running processes of StartBackground, and of RunCommand with a tag, whose tag begins
// with tagPrefix, by pid.
func (e *Envd) ListBackground(ctx context.Context, tagPrefix string) ([]BackgroundProcess, error) {
	list, err := e.ListProcesses(ctx)
	if err != nil {
		return nil, err
	}
	var out []BackgroundProcess
	for _, p := range list {
		if !strings.HasPrefix(p.Tag, tagPrefix) {
			continue
		}
		a := p.Config.Args
		bp := BackgroundProcess{PID: p.PID, Tag: p.Tag, Cwd: p.Config.Cwd}
		switch {
		case p.Config.Cmd == "setsid" && len(a) == 7 && a[2] == backgroundWrapper:
			bp.Command, bp.Background = a[4], true
		case p.Config.Cmd == "/bin/bash" && len(a) == 6 && a[1] == backgroundWrapper:
			bp.Command, bp.Background, bp.PTY = a[3], true, true
		case p.Config.Cmd == "setsid" && len(a) == 9 && a[3] == commandShell:
			bp.Command = a[5]
		default:
			continue
		}
		out = append(out, bp)
	}
	return out, nil
}
