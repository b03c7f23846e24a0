// Package pgtest starts a real PostgreSQL server for tests: Debian's initdb and postgres (package postgresql,
// /usr/lib/postgresql/VERSION/bin), a cluster in a fresh temporary directory, listening on a loopback port only,
// with password authentication. PostgreSQL refuses to run as root, so when the tests do, the server runs as the
// unprivileged user nobody.
package pgtest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/e2b-mcp/e2b-mcp/internal/optional"
)

// User is the database superuser the server is made with.
const User = "e2bmcp"

// Server is a running PostgreSQL server.
type Server struct {
	dir      string // the temporary directory: data/, the log, the password file
	port     int
	password string
	cmd      *exec.Cmd
	exited   chan struct{}
	bin      string              // the directory of the binaries
	cred     *syscall.Credential // the user postgres runs as (nil: ourselves)
	dbs      atomic.Int64
}

// ErrNotInstalled is wrapped when the PostgreSQL binaries are missing.
var ErrNotInstalled = errors.New("PostgreSQL is not installed (apt-get install postgresql)")

// binDir finds Debian's PostgreSQL binaries, the newest version first.
func binDir() (string, error) {
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool { return version(dirs[i]) > version(dirs[j]) })
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "postgres")); err == nil {
			return d, nil
		}
	}
	if p, err := exec.LookPath("postgres"); err == nil {
		return filepath.Dir(p), nil
	}
	return "", ErrNotInstalled
}

func version(binDir string) int {
	v, _ := strconv.Atoi(filepath.Base(filepath.Dir(binDir)))
	return v
}

// Start makes a cluster and starts its server; Stop ends it and removes its files.
func Start() (*Server, error) {
	bin, err := binDir()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "e2b-mcp-pgtest-")
	if err != nil {
		return nil, err
	}
	s := &Server{dir: dir, password: randomHex(16), exited: make(chan struct{})}
	ok := false
	defer func() {
		if !ok {
			os.RemoveAll(dir)
		}
	}()
	cred, err := runAs(dir)
	if err != nil {
		return nil, err
	}
	pwfile := filepath.Join(dir, "pw")
	if err := os.WriteFile(pwfile, []byte(s.password+"\n"), 0o600); err != nil {
		return nil, err
	}
	if err := chown(cred, pwfile); err != nil {
		return nil, err
	}
	initdb := exec.Command(filepath.Join(bin, "initdb"), "-D", filepath.Join(dir, "data"), "-U", User,
		"--pwfile", pwfile, "--auth", "scram-sha-256", "-E", "UTF8", "--locale", "C.UTF-8", "--no-instructions")
	initdb.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	initdb.Dir = dir
	if out, err := initdb.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("initdb: %v\n%s", err, out)
	}
	// The port comes from a listener on :0; another process could take it before postgres binds it, so a
	// failed start is retried on a new port.
	for attempt := 0; ; attempt++ {
		err = s.startOn(bin, cred)
		if err == nil {
			break
		}
		if attempt == 2 {
			return nil, err
		}
	}
	ok = true
	return s, nil
}

func (s *Server) startOn(bin string, cred *syscall.Credential) error {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	s.port = ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	s.bin, s.cred = bin, cred
	return s.run()
}

// Restart stops the server as an operator's restart does (a fast shutdown: the connections are ended) and starts
// it again on the same port with the same databases.
func (s *Server) Restart() error {
	_ = s.cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-s.exited:
	case <-time.After(20 * time.Second):
		s.kill()
	}
	return s.run()
}

// Pause stops the server and each of its processes (SIGSTOP), as a stalled machine or a debugger would:
// connections stay open and unanswered until Resume. Each backend leads a session of its own, so the
// postmaster's children are signalled one by one, after the postmaster (which then forks no more).
func (s *Server) Pause() error { return s.signalAll(syscall.SIGSTOP) }

// Resume lets a paused server go on (SIGCONT).
func (s *Server) Resume() error { return s.signalAll(syscall.SIGCONT) }

func (s *Server) signalAll(sig syscall.Signal) error {
	pid := s.cmd.Process.Pid
	if err := syscall.Kill(pid, sig); err != nil {
		return err
	}
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, stat := range stats {
		b, err := os.ReadFile(stat)
		if err != nil {
			continue // it ended
		}
		// pid (comm) state ppid ...: comm may hold spaces and parentheses, so the fields after the last ')'.
		fields := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
		if len(fields) > 1 && fields[1] == strconv.Itoa(pid) {
			child, _ := strconv.Atoi(filepath.Base(filepath.Dir(stat)))
			_ = syscall.Kill(child, sig)
		}
	}
	return nil
}

// run starts postgres on s.port and waits until it takes connections.
func (s *Server) run() error {
	bin, cred := s.bin, s.cred
	logPath := filepath.Join(s.dir, "postgres.log")
	logFile, err := os.OpenFile(logPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	defer logFile.Close()
	s.cmd = exec.Command(filepath.Join(bin, "postgres"), "-D", filepath.Join(s.dir, "data"),
		"-p", strconv.Itoa(s.port), "-c", "listen_addresses=127.0.0.1", "-c", "unix_socket_directories=",
		// A test cluster: durability against a crash of the machine is not what the tests check.
		"-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off",
		"-c", "max_connections=300")
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred, Setpgid: true}
	dieWithParent(s.cmd.SysProcAttr)
	s.cmd.Stdout, s.cmd.Stderr = logFile, logFile
	if err := s.cmd.Start(); err != nil {
		return fmt.Errorf("starting postgres: %w", err)
	}
	s.exited = make(chan struct{})
	go func() { _ = s.cmd.Wait(); close(s.exited) }()

	deadline := time.Now().Add(60 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		conn, err := pgx.Connect(ctx, s.URL("postgres"))
		cancel()
		if err == nil {
			conn.Close(context.Background())
			return nil
		}
		select {
		case <-s.exited:
			log, _ := os.ReadFile(logPath)
			return fmt.Errorf("postgres exited at start: %s", log)
		default:
		}
		if time.Now().After(deadline) {
			s.kill()
			log, _ := os.ReadFile(logPath)
			return fmt.Errorf("postgres did not accept connections within a minute: %v\n%s", err, log)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// runAs is the user the server runs as: nobody when we are root (PostgreSQL refuses root), else ourselves
// (nil). dir is given to that user.
func runAs(dir string) (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup("nobody")
	if err != nil {
		return nil, fmt.Errorf("PostgreSQL will not run as root, and there is no user nobody to run it as: %w", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	cred := &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
	return cred, chown(cred, dir)
}

func chown(cred *syscall.Credential, path string) error {
	if cred == nil {
		return nil
	}
	return os.Chown(path, int(cred.Uid), int(cred.Gid))
}

// URL is the address of database db, password included.
func (s *Server) URL(db string) string {
	return fmt.Sprintf("postgres://%s:%s@127.0.0.1:%d/%s", User, s.password, s.port, db)
}

// Password is the superuser's password (for tests that check it never shows).
func (s *Server) Password() string { return s.password }

// Addr is host:port of the server.
func (s *Server) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port)) }

// NewDatabase creates an empty database and returns its URL.
func (s *Server) NewDatabase() (string, error) {
	name := fmt.Sprintf("test_%d", s.dbs.Add(1))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, s.URL("postgres"))
	if err != nil {
		return "", err
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		return "", err
	}
	return s.URL(name), nil
}

// Exec runs SQL in database db (tests that damage or inspect a store behind its back).
func (s *Server) Exec(dbURL, sql string, args ...any) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	_, err = conn.Exec(ctx, sql, args...)
	return err
}

// Stop ends the server (a fast shutdown) and removes its files.
func (s *Server) Stop() error {
	if s.cmd != nil && s.cmd.Process != nil {
		_ = s.cmd.Process.Signal(syscall.SIGINT)
		select {
		case <-s.exited:
		case <-time.After(20 * time.Second):
			s.kill()
		}
	}
	return os.RemoveAll(s.dir)
}

func (s *Server) kill() {
	_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
	<-s.exited
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// Dump is pg_dump's plain-text dump of the database at dbURL: all that a copy of the database gives away.
func (s *Server) Dump(dbURL string) ([]byte, error) {
	bin, err := binDir()
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, filepath.Join(bin, "pg_dump"), "--no-owner", "--dbname", dbURL)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("pg_dump: %w: %s", err, stderr.String())
	}
	return out, nil
}

// Database starts a server for the test t, stopped when t ends, and returns it with a new database on it. Where
// PostgreSQL is not installed, t is skipped (and the skip recorded), or fails in CI: see internal/optional.
func Database(t testing.TB) (*Server, string) {
	t.Helper()
	s, err := Start()
	if errors.Is(err, ErrNotInstalled) {
		optional.Missing(t, err.Error())
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Stop() })
	db, err := s.NewDatabase()
	if err != nil {
		t.Fatal(err)
	}
	return s, db
}
