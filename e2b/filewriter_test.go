package e2b

import (
	"strings"
	"testing"
)

// A FileWriter replaces the file it writes, and what it was given is in the file once it is closed.
func TestConformanceFileWriter(t *testing.T) {
	conformance(t, func(t *testing.T, e *Envd) {
		path := "/tmp/" + unique(t) + "/sub/out.log"
		w, err := e.NewFileWriter(emuCtx(t), path)
		if err != nil {
			t.Fatal(err)
		}
		for _, part := range []string{"one\n", "two\n", strings.Repeat("x", 100_000) + "\n"} {
			if _, err := w.Write([]byte(part)); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		if got := sh(t, e, "head -c 8 "+path+"; wc -c <"+path); got != "one\ntwo\n100009\n" {
			t.Fatalf("written: %q", got)
		}
		if _, err := w.Write([]byte("late")); err == nil {
			t.Fatal("a closed writer took more")
		}
		// A second writer replaces the file.
		w, err = e.NewFileWriter(emuCtx(t), path)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write([]byte("new\n")); err != nil {
			t.Fatal(err)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		if got := sh(t, e, "cat "+path); got != "new\n" {
			t.Fatalf("rewritten: %q", got)
		}
		if _, err := e.NewFileWriter(emuCtx(t), "/proc/nope/x"); err == nil {
			t.Fatal("a writer to a file that cannot be made started")
		}
	})
}
