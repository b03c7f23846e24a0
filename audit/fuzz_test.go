package audit

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// FuzzRead reads a log whose middle holds arbitrary bytes (a line cut short by a crash, a file another program
// wrote to, a torn outcome record): Read never fails on what a line holds, and the entries recorded whole before
// and after are read as they were, the first first and the last last.
func FuzzRead(f *testing.F) {
	f.Add([]byte(`{"time":"2026-01-01T00:00:00Z","id":"0000000000000001","owner":"alice","outcome":"started"}` + "\n" +
		`{"time":"2026-01-01T00:00:01Z","ends":"0000000000000001","outcome":"ok","duration_ms":1}` + "\n"))
	f.Add([]byte(`{"time":"2026-01-01T00:00:01Z","ends":"","outcome":"error","error":"\u0000"}`))
	f.Add([]byte("{\"owner\":\"bob\",\"args\":{\"a\":[1,{\"b\":null}]}}\n\n\r\n{"))
	f.Add([]byte("\xff\xfe\x00 not json"))
	f.Add([]byte(`{"id":"x","ends":"x"}` + "\n" + `{"ends":"x","outcome":"ok"}`))
	first, err := encodeEntry(numbered("first", 1))
	if err != nil {
		f.Fatal(err)
	}
	last, err := encodeEntry(numbered("last", 2))
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, middle []byte) {
		// As the writer makes it: a line after a cut one starts on a line of its own (see appendLocked).
		log := append(append([]byte(nil), first...), middle...)
		if !bytes.HasSuffix(log, []byte("\n")) {
			log = append(log, '\n')
		}
		log = append(log, last...)
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, activeName), log, 0o600); err != nil {
			t.Fatal(err)
		}
		got, err := Read(dir, Filter{})
		if err != nil {
			t.Fatalf("Read of a log with %q in its middle: %v", middle, err)
		}
		if len(got) < 2 || got[0].Session != "first" || got[len(got)-1].Session != "last" || got[len(got)-1].Outcome != OutcomeOK {
			t.Fatalf("Read of a log with %q in its middle: %+v; want the first and the last entry around it", middle, got)
		}
	})
}
