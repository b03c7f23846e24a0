package emulator

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"

	"golang.org/x/sys/unix"
)

// dialScript connects fd 3 to 127.0.0.1:$1 (bash's /dev/tcp), says so and waits until the emulator has taken a
// copy of the connection; connection refused ends it without a word.
const dialScript = `exec 3<>"/dev/tcp/127.0.0.1/$1" || exit 1; echo connected; read -r _`

// dialInside connects to 127.0.0.1:port in the network of the sandbox whose init is initPID. The emulator cannot
// enter that network itself (a multithreaded process cannot join a user namespace), so a process that does
// (nsenter into the sandbox's user and network namespaces, the host's bash) makes the connection and the
// emulator copies its socket out of it with pidfd_getfd: from then on it is an ordinary connection of the host.
func (iso *isolation) dialInside(ctx context.Context, initPID, port int) (net.Conn, error) {
	if iso.err != nil {
		return nil, iso.err
	}
	cmd := exec.CommandContext(ctx, iso.nsenter, "--target", strconv.Itoa(initPID), "--user", "--net",
		"--setuid", "1000", "--setgid", "1000", "--", "/bin/bash", "-c", dialScript, "dial", strconv.Itoa(port))
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("emulator: dialing into the sandbox: %w", err)
	}
	defer func() {
		_ = stdin.Close() // lets the script end; its copy of the socket closes with it
		_ = cmd.Wait()
	}()
	if line, err := bufio.NewReader(stdout).ReadString('\n'); err != nil || line != "connected\n" {
		return nil, errPortClosed
	}
	// nsenter without --pid or --fork execs the script in its own process: the pid is the script's.
	pidfd, err := unix.PidfdOpen(cmd.Process.Pid, 0)
	if err != nil {
		return nil, fmt.Errorf("emulator: dialing into the sandbox: pidfd_open: %w", err)
	}
	defer unix.Close(pidfd)
	fd, err := unix.PidfdGetfd(pidfd, 3, 0)
	if err != nil {
		return nil, fmt.Errorf("emulator: dialing into the sandbox: pidfd_getfd: %w", err)
	}
	f := os.NewFile(uintptr(fd), "sandbox-port")
	defer f.Close()
	return net.FileConn(f)
}
