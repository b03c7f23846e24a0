package audit

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/e2b-mcp/e2b-mcp/internal/waitfor"
)

// The test binary doubles as another process writing to the same log: with
// helperEnv set it records HELPER_COUNT entries and exits.
const helperEnv = "AUDIT_WRITER_HELPER"

func TestMain(m *testing.M) {
	if os.Getenv(helperEnv) != "" {
		os.Exit(runWriter())
	}
	os.Exit(m.Run())
}

func runWriter() int {
	n, _ := strconv.Atoi(os.Getenv("HELPER_COUNT"))
	maxBytes, _ := strconv.ParseInt(os.Getenv("HELPER_MAX_BYTES"), 10, 64)
	l, err := Open(os.Getenv("HELPER_DIR"), Options{MaxBytes: maxBytes, MaxFiles: 1000})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer l.Close()
	for i := range n {
		if err := l.Record(numbered("child", i)); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	return 0
}

func numbered(writer string, i int) Entry {
	return Entry{
		Owner: "alice", Session: writer, Tool: "e2b_exec", Decision: "allow", Rule: "exec", Outcome: OutcomeOK,
		Args:       map[string]any{"command": fmt.Sprintf("echo %d", i), "sandbox_id": "sbx1"},
		DurationMS: int64(i), SandboxID: "sbx1",
	}
}

func openLog(t *testing.T, dir string, opts Options) *Log {
	t.Helper()
	l, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

func TestRecordAndRead(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "audit") // created by Open, with its mode
	l := openLog(t, dir, Options{})
	when := time.Date(2026, 7, 1, 14, 0, 0, 123, time.FixedZone("CEST", 2*3600))
	e := Entry{
		Time: when, Owner: "alice", Session: "s1", Tool: "e2b_exec",
		Args:     map[string]any{"sandbox_id": "sbx1", "command": "ls && pwd", "timeout_ms": 1000.0},
		Decision: "allow", Rule: "exec", Outcome: OutcomeOK, DurationMS: 42, SandboxID: "sbx1",
	}
	if err := l.Record(e); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(dir, activeName))
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Count(raw, []byte("\n")) != 1 || !bytes.Contains(raw, []byte(`"command":"ls && pwd"`)) {
		t.Errorf("line = %s", raw)
	}
	got, err := Read(dir, Filter{})
	if err != nil || len(got) != 1 {
		t.Fatalf("Read = %v, %v", got, err)
	}
	g := got[0]
	if !g.Time.Equal(when) || g.Time.Location() != time.UTC {
		t.Errorf("time %v, want %v in UTC", g.Time, when)
	}
	if g.Owner != "alice" || g.Session != "s1" || g.Tool != "e2b_exec" || g.Decision != "allow" || g.Rule != "exec" ||
		g.Outcome != OutcomeOK || g.DurationMS != 42 || g.SandboxID != "sbx1" || g.Args["command"] != "ls && pwd" || g.Args["timeout_ms"] != 1000.0 {
		t.Errorf("read back %+v", g)
	}

	// An entry without a time is stamped now.
	start := time.Now()
	if err := l.Record(Entry{Tool: "e2b_list_sandboxes", Decision: "allow", Outcome: OutcomeOK}); err != nil {
		t.Fatal(err)
	}
	got, _ = Read(dir, Filter{Tool: "e2b_list_sandboxes"})
	if len(got) != 1 || got[0].Time.Before(start.Add(-time.Second)) || got[0].Args != nil {
		t.Errorf("stamped entry = %+v", got)
	}
	if runtime.GOOS != "windows" {
		for name, want := range map[string]os.FileMode{dir: 0o700, filepath.Join(dir, activeName): 0o600} {
			if st, err := os.Stat(name); err != nil || st.Mode().Perm() != want {
				t.Errorf("%s: mode %v, want %v", name, st.Mode().Perm(), want)
			}
		}
	}
}

func TestNoSecretInFile(t *testing.T) {
	dir := t.TempDir()
	l := openLog(t, dir, Options{})
	err := l.Record(Entry{
		Owner: "alice", Session: "s1", Tool: "e2b_create_sandbox", Decision: "allow", Outcome: OutcomeError,
		Args: map[string]any{
			"title":        "uses " + testE2BKey,
			"env_vars":     map[string]any{"E2B_API_KEY": testE2BKey, "GITHUB_TOKEN": testGHP, "PASSWORD": "hunter2"},
			"upload_files": []any{map[string]any{"session_path": "id_rsa", "sandbox_path": "/home/user/.ssh/id_rsa"}},
		},
		Error: "E2B API error (401): Invalid API key " + testE2BKey,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Record(Entry{
		Tool: "e2b_write_file", Decision: "allow", Outcome: OutcomeOK,
		Args: map[string]any{"path": "/home/user/.env", "content": "OPENAI_API_KEY=" + testSK + "\n" + testPEM + "\n" + strings.Repeat("x", 5000)},
	}); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(dir, activeName))
	if err != nil {
		t.Fatal(err)
	}
	if m := secretShapes.Find(raw); m != nil {
		t.Fatalf("secret %q is in the file:\n%s", m, raw)
	}
	for _, want := range []string{`"E2B_API_KEY":"[redacted]"`, `"GITHUB_TOKEN":"[redacted]"`, `Invalid API key [redacted]`, `bytes clipped]`} {
		if !bytes.Contains(raw, []byte(want)) {
			t.Errorf("file lacks %s:\n%s", want, raw)
		}
	}
}

func TestRotation(t *testing.T) {
	dir := t.TempDir()
	const maxBytes = 1000
	l := openLog(t, dir, Options{MaxBytes: maxBytes, MaxFiles: 3})
	for i := range 40 {
		if err := l.Record(numbered("s", i)); err != nil {
			t.Fatal(err)
		}
	}
	names := dirNames(t, dir)
	if names != "audit.1.jsonl,audit.2.jsonl,audit.jsonl,audit.lock" {
		t.Fatalf("files after rotation: %s", names)
	}
	for _, n := range []string{"audit.1.jsonl", "audit.2.jsonl", "audit.jsonl"} {
		if st, _ := os.Stat(filepath.Join(dir, n)); st.Size() > maxBytes || st.Size() == 0 {
			t.Errorf("%s has %d bytes (max %d)", n, st.Size(), maxBytes)
		}
	}
	// What is left is the newest entries, in order, without a gap.
	got, err := Read(dir, Filter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) == 0 || got[len(got)-1].DurationMS != 39 {
		t.Fatalf("read %d entries, last %+v", len(got), got[len(got)-1])
	}
	for i := 1; i < len(got); i++ {
		if got[i].DurationMS != got[i-1].DurationMS+1 {
			t.Fatalf("entries out of order or missing: %d after %d", got[i].DurationMS, got[i-1].DurationMS)
		}
	}

	// Fewer files allowed than exist (MaxFiles lowered): the surplus goes.
	l2 := openLog(t, dir, Options{MaxBytes: maxBytes, MaxFiles: 2})
	for i := 40; i < 50; i++ {
		if err := l2.Record(numbered("s", i)); err != nil {
			t.Fatal(err)
		}
	}
	if names := dirNames(t, dir); names != "audit.1.jsonl,audit.jsonl,audit.lock" {
		t.Errorf("files with MaxFiles 2: %s", names)
	}

	// A line larger than MaxBytes still goes in, alone in its file.
	big := numbered("s", 50)
	big.Args["list"] = make([]any, 100)
	if err := l2.Record(big); err != nil {
		t.Fatal(err)
	}
	if err := l2.Record(numbered("s", 51)); err != nil {
		t.Fatal(err)
	}
	got, _ = Read(dir, Filter{})
	if got[len(got)-2].DurationMS != 50 || got[len(got)-1].DurationMS != 51 {
		t.Errorf("oversized line lost: last entries %d, %d", got[len(got)-2].DurationMS, got[len(got)-1].DurationMS)
	}
}

func TestRotationSingleFile(t *testing.T) {
	dir := t.TempDir()
	l := openLog(t, dir, Options{MaxBytes: 500, MaxFiles: 1})
	for i := range 10 {
		if err := l.Record(numbered("s", i)); err != nil {
			t.Fatal(err)
		}
	}
	if names := dirNames(t, dir); names != "audit.jsonl,audit.lock" {
		t.Errorf("files with MaxFiles 1: %s", names)
	}
}

func dirNames(t *testing.T, dir string) string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), roomPrefix) { // one per open Log (see Reserve)
			names = append(names, e.Name())
		}
	}
	return strings.Join(names, ",")
}

func TestReadFilters(t *testing.T) {
	dir := t.TempDir()
	l := openLog(t, dir, Options{MaxBytes: 600, MaxFiles: 100}) // spread across files
	t0 := time.Date(2026, 7, 1, 0, 0, 0, 0, time.UTC)
	type spec struct{ session, sandbox, tool, decision string }
	specs := []spec{
		{"s1", "sbx1", "e2b_exec", "allow"},
		{"s1", "sbx2", "e2b_read_file", "allow"},
		{"s2", "sbx3", "e2b_exec", "deny"},
		{"s2", "", "e2b_list_sandboxes", "allow"},
		{"s1", "sbx1", "e2b_manage_sandbox", "require_approval"},
		{"s3", "sbx4", "e2b_exec", "allow"},
	}
	for i, s := range specs {
		err := l.Record(Entry{Time: t0.Add(time.Duration(i) * time.Hour), Session: s.session, SandboxID: s.sandbox,
			Tool: s.tool, Decision: s.decision, Outcome: OutcomeOK, DurationMS: int64(i)})
		if err != nil {
			t.Fatal(err)
		}
	}
	if rotated, _ := rotatedFiles(dir); len(rotated) == 0 {
		t.Fatal("the test means to read across rotated files")
	}
	cases := []struct {
		name string
		f    Filter
		want []int64
	}{
		{"all", Filter{}, []int64{0, 1, 2, 3, 4, 5}},
		{"session", Filter{Session: "s1"}, []int64{0, 1, 4}},
		{"sandbox", Filter{SandboxID: "sbx1"}, []int64{0, 4}},
		{"tool", Filter{Tool: "e2b_exec"}, []int64{0, 2, 5}},
		{"decision", Filter{Decision: "allow"}, []int64{0, 1, 3, 5}},
		{"since inclusive", Filter{Since: t0.Add(4 * time.Hour)}, []int64{4, 5}},
		{"until exclusive", Filter{Until: t0.Add(2 * time.Hour)}, []int64{0, 1}},
		{"window", Filter{Since: t0.Add(time.Hour), Until: t0.Add(3 * time.Hour)}, []int64{1, 2}},
		{"combined", Filter{Session: "s1", Tool: "e2b_exec", Decision: "allow"}, []int64{0}},
		{"none", Filter{Session: "nobody"}, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := Read(dir, c.f)
			if err != nil {
				t.Fatal(err)
			}
			var ids []int64
			for _, e := range got {
				ids = append(ids, e.DurationMS)
			}
			if fmt.Sprint(ids) != fmt.Sprint(c.want) {
				t.Errorf("Read(%+v) = %v, want %v", c.f, ids, c.want)
			}
		})
	}
}

func TestReadTolerance(t *testing.T) {
	if _, err := Read(filepath.Join(t.TempDir(), "missing"), Filter{}); err == nil {
		t.Error("Read of a missing directory returned nil error")
	}
	// A directory written by something else: no lock file, a torn last line.
	dir := t.TempDir()
	content := `{"time":"2026-07-01T00:00:00Z","tool":"e2b_exec","decision":"allow","outcome":"ok","duration_ms":1}
not json
{"time":"2026-07-01T00:00:01Z","tool":"e2b_exec","decision":"deny","outcome":"denied","duration_ms":2}
{"time":"2026-07-01T00:00:02Z","tool":"e2b_ex`
	if err := os.WriteFile(filepath.Join(dir, activeName), []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := Read(dir, Filter{})
	if err != nil || len(got) != 2 || got[1].Outcome != OutcomeDenied {
		t.Errorf("Read = %+v, %v", got, err)
	}
	// An empty directory has no entries.
	if got, err := Read(t.TempDir(), Filter{}); err != nil || len(got) != 0 {
		t.Errorf("Read of an empty directory = %v, %v", got, err)
	}
}

func TestClose(t *testing.T) {
	l, err := Open(t.TempDir(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if err := l.Record(Entry{Tool: "x"}); !errors.Is(err, ErrClosed) {
		t.Errorf("Record after Close = %v", err)
	}
}

func TestOpenDefaultsAndErrors(t *testing.T) {
	l := openLog(t, t.TempDir(), Options{})
	if l.opts.MaxBytes != 10<<20 || l.opts.MaxFiles != 5 {
		t.Errorf("defaults = %+v", l.opts)
	}
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(filepath.Join(file, "sub"), Options{}); err == nil {
		t.Error("Open under a regular file succeeded")
	}
}

// TestConcurrentWriters: goroutines on two Logs sharing a directory, with rotation
// forced often; every line must survive, whole and exactly once.
func TestConcurrentWriters(t *testing.T) {
	dir := t.TempDir()
	opts := Options{MaxBytes: 4 << 10, MaxFiles: 1000}
	logs := []*Log{openLog(t, dir, opts), openLog(t, dir, opts)}
	const writers, perWriter = 6, 25
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l := logs[w%2]
			for i := range perWriter {
				if err := l.Record(numbered(fmt.Sprintf("w%d", w), i)); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	waitfor.Return(t, time.Minute, "the concurrent writers of the audit log", wg.Wait)
	checkAllPresent(t, dir, writers, perWriter, nil)
}

func TestConcurrentProcesses(t *testing.T) {
	dir := t.TempDir()
	const n, maxBytes = 40, 2 << 10
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"=1", "HELPER_DIR="+dir,
		"HELPER_COUNT="+strconv.Itoa(n), "HELPER_MAX_BYTES="+strconv.Itoa(maxBytes))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	l := openLog(t, dir, Options{MaxBytes: maxBytes, MaxFiles: 1000})
	for i := range n {
		if err := l.Record(numbered("w0", i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("writer process: %v: %s", err, stderr.String())
	}
	checkAllPresent(t, dir, 1, n, []string{"child"})
}

// checkAllPresent reads the log and checks that writers w0..w(writers-1) and the
// extra sessions each have entries 0..perWriter-1 exactly once, in their order.
func checkAllPresent(t *testing.T, dir string, writers, perWriter int, extra []string) {
	t.Helper()
	got, err := Read(dir, Filter{})
	if err != nil {
		t.Fatal(err)
	}
	sessions := extra
	for w := range writers {
		sessions = append(sessions, fmt.Sprintf("w%d", w))
	}
	if len(got) != len(sessions)*perWriter {
		t.Fatalf("read %d entries, want %d", len(got), len(sessions)*perWriter)
	}
	next := map[string]int64{}
	for _, e := range got {
		if e.DurationMS != next[e.Session] {
			t.Fatalf("%s: entry %d where %d was due", e.Session, e.DurationMS, next[e.Session])
		}
		next[e.Session]++
	}
	for _, s := range sessions {
		if next[s] != int64(perWriter) {
			t.Errorf("%s: %d entries", s, next[s])
		}
	}
}

func BenchmarkRecord(b *testing.B) {
	l, err := Open(b.TempDir(), Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	e := numbered("bench", 1)
	b.ReportAllocs()
	for b.Loop() {
		if err := l.Record(e); err != nil {
			b.Fatal(err)
		}
	}
}

// One call cannot make a huge entry, and a few cannot rotate the history away: thousands of env_vars names (the
// attack: ~45k long names made a 12 MB line) are capped like every other object, and an entry still over
// MaxEntryBytes has its largest arguments replaced by their sizes, which the entry records.
func TestEntryCapKeepsHistory(t *testing.T) {
	dir := t.TempDir()
	l := openLog(t, dir, Options{MaxBytes: 1 << 20, MaxFiles: 2})
	evidence := numbered("victim", 1)
	if err := l.Record(evidence); err != nil {
		t.Fatal(err)
	}
	env := map[string]any{}
	for i := range 45000 {
		env[fmt.Sprintf("VAR_%05d_%s", i, strings.Repeat("x", 250))] = "v"
	}
	many := map[string]any{}
	for i := range 100 {
		many[fmt.Sprintf("k%03d", i)] = strings.Repeat("y", MaxStringBytes)
	}
	for i := range 5 {
		if err := l.Record(Entry{Owner: "mallory", Session: "m", Tool: "e2b_create_sandbox", DurationMS: int64(i),
			Args: map[string]any{"env_vars": env, "title": "t", "nested": map[string]any{"a": many, "b": many, "c": many}}}); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{"audit.jsonl", "audit.1.jsonl"} {
		data, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		for _, line := range strings.SplitAfter(string(data), "\n") {
			if len(line) > MaxEntryBytes {
				t.Errorf("%s has a line of %d bytes (cap %d)", name, len(line), MaxEntryBytes)
			}
		}
	}
	got, err := Read(dir, Filter{Session: "victim"})
	if err != nil || len(got) != 1 {
		t.Fatalf("the earlier entry was rotated away by five calls: %d entries, %v", len(got), err)
	}
	got, _ = Read(dir, Filter{Session: "m"})
	if len(got) != 5 {
		t.Fatalf("read %d of the 5 big entries", len(got))
	}
	e := got[0]
	env0, _ := e.Args["env_vars"].(map[string]any)
	if len(env0) > maxItems+1 || env0["[more]"] != fmt.Sprintf("[%d more variables]", 45000-maxItems) {
		t.Errorf("env_vars names not capped: %d names, more %v", len(env0), env0["[more]"])
	}
	if e.Clipped == nil || e.Clipped.EntryBytes <= MaxEntryBytes || e.Clipped.CapBytes != MaxEntryBytes ||
		!slices.Contains(e.Clipped.Args, "nested") || e.Args["title"] != "t" {
		t.Errorf("clipped entry: clipped %+v, title %v", e.Clipped, e.Args["title"])
	}
	if s, _ := e.Args["nested"].(string); !strings.Contains(s, "bytes clipped") {
		t.Errorf("nested = %v", e.Args["nested"])
	}
}

// BenchmarkCallRecords is one call's records as the server writes them (Reserve, Start, Finish), one call at a
// time and many at once, each record durable before its method returns.
func BenchmarkCallRecords(b *testing.B) {
	for _, concurrent := range []bool{false, true} {
		name := "serial"
		if concurrent {
			name = "parallel"
		}
		b.Run(name, func(b *testing.B) {
			l, err := Open(b.TempDir(), Options{})
			if err != nil {
				b.Fatal(err)
			}
			defer l.Close()
			e := numbered("bench", 1)
			call := func() error {
				c, err := l.Reserve()
				if err != nil {
					return err
				}
				if err := c.Start(e); err != nil {
					return err
				}
				e := e
				e.Outcome = OutcomeOK
				return c.Finish(e)
			}
			b.ReportAllocs()
			if !concurrent {
				for b.Loop() {
					if err := call(); err != nil {
						b.Fatal(err)
					}
				}
				return
			}
			b.SetParallelism(16) // 32 calls at once on 2 cores
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if err := call(); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}
