package tools

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/e2b-mcp/e2b-mcp/e2b"
	"github.com/e2b-mcp/e2b-mcp/lifecycle"
	"github.com/e2b-mcp/e2b-mcp/state"
)

func TestCreateSandbox(t *testing.T) {
	t.Parallel()
	forEachEra(t, func(t *testing.T, e *env, s *session) {
		res := s.ok(t, "e2b_create_sandbox", map[string]any{
			"title": "build", "timeout_seconds": 600, "env_vars": map[string]any{"GREETING": "hello there"},
		})
		id := res["sandbox_id"].(string)
		for k, want := range map[string]any{"status": "running", "template": "base", "workspace_path": "/home/user",
			"timeout_seconds": 600.0, "files_uploaded": 0.0, "title": "build"} {
			if res[k] != want {
				t.Errorf("%s = %v, want %v", k, res[k], want)
			}
		}
		sb, ok := e.emu.Sandbox(id)
		if !ok {
			t.Fatal("the emulator has no such sandbox")
		}
		if !sb.Secure || sb.TemplateID != "base" {
			t.Errorf("sandbox secure=%v template=%s", sb.Secure, sb.TemplateID)
		}
		for k, v := range lifecycle.Metadata("alice", "main", "build") {
			if sb.Metadata[k] != v {
				t.Errorf("metadata %s = %q, want %q", k, sb.Metadata[k], v)
			}
		}
		rec, err := e.store.Sandbox("alice", id)
		if err != nil {
			t.Fatal(err)
		}
		if rec.Session != "main" || rec.Title != "build" || rec.State != state.StateRunning || rec.TimeoutSeconds != 600 {
			t.Errorf("record %+v", rec)
		}
		if rec.AccessToken != sb.AccessToken || rec.AccessToken == "" || rec.EnvdVersion == "" || rec.Domain == "" {
			t.Errorf("record lacks the envd connection: token %v, version %q, domain %q", rec.AccessToken != "", rec.EnvdVersion, rec.Domain)
		}
		out := s.exec(t, id, `echo "$GREETING from $(pwd)"`)
		if out["stdout"] != "hello there from /home/user\n" {
			t.Fatalf("stdout %q", out["stdout"])
		}

		res = s.ok(t, "e2b_create_sandbox", nil)
		if res["template"] != "base" || res["timeout_seconds"] != float64(DefaultTimeoutSeconds) {
			t.Fatalf("defaults: %v", res)
		}
	})
}

func TestCreateUploadsNotConfigured(t *testing.T) {
	t.Parallel()
	forEachEra(t, func(t *testing.T, e *env, s *session) {
		got := s.fail(t, "e2b_create_sandbox", map[string]any{
			"upload_files": []any{map[string]any{"session_path": "data.csv", "sandbox_path": "/home/user/data.csv"}},
		})
		wantContains(t, got, "File uploads are not configured", "--storage-root", "Nothing was created")
		if n := len(e.emu.Sandboxes()); n != 0 {
			t.Fatalf("%d sandboxes were created", n)
		}
	})
}

// makeStorageRoot makes a storage root with a file, a directory tree, and symlinks inside and out.
func makeStorageRoot(t *testing.T) (root, outside string) {
	t.Helper()
	base := t.TempDir()
	root = filepath.Join(base, "root")
	outside = filepath.Join(base, "outside")
	for _, d := range []string{root, outside, filepath.Join(root, "proj", "src")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	files := map[string]string{
		filepath.Join(root, "data.csv"):                "a,b\n1,2\n",
		filepath.Join(root, "proj", "README"):          "readme\n",
		filepath.Join(root, "proj", "src", "main.go"):  "package main\n",
		filepath.Join(outside, "secret.txt"):           "top secret\n",
		filepath.Join(root, "proj", "src", "notes.md"): "# notes\n",
	}
	for p, content := range files {
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for link, target := range map[string]string{
		filepath.Join(root, "inside-link"): filepath.Join(root, "data.csv"),
		filepath.Join(root, "escape-link"): filepath.Join(outside, "secret.txt"),
		filepath.Join(root, "escape-dir"):  outside,
	} {
		if err := os.Symlink(target, link); err != nil {
			t.Fatal(err)
		}
	}
	return root, outside
}

func TestCreateUploads(t *testing.T) {
	t.Parallel()
	root, _ := makeStorageRoot(t)
	forEachEra(t, func(t *testing.T, e *env, s *session) {
		res := s.ok(t, "e2b_create_sandbox", map[string]any{"upload_files": []any{
			map[string]any{"session_path": "data.csv", "sandbox_path": "/home/user/in/data.csv"},
			map[string]any{"session_path": filepath.Join(root, "proj"), "sandbox_path": "work"},
			map[string]any{"session_path": "inside-link"},
		}})
		if num(res["files_uploaded"]) != 5 || res["warning"] != nil {
			t.Fatalf("result %v", res)
		}
		id := res["sandbox_id"].(string)
		out := s.exec(t, id, "cat in/data.csv; cat work/README work/src/main.go work/src/notes.md; cat /home/user/inside-link")
		if want := "a,b\n1,2\nreadme\npackage main\n# notes\na,b\n1,2\n"; out["stdout"] != want {
			t.Fatalf("uploaded contents %q, want %q", out["stdout"], want)
		}
	}, func(c *Config) { c.StorageRoots = []string{root} })
}

func TestCreateUploadRefusals(t *testing.T) {
	t.Parallel()
	root, outside := makeStorageRoot(t)
	forEachEra(t, func(t *testing.T, e *env, s *session) {
		for _, c := range []struct {
			path string
			want []string
		}{
			{"../outside/secret.txt", []string{"outside the storage roots"}},
			{"proj/../../outside/secret.txt", []string{"outside the storage roots"}},
			{filepath.Join(outside, "secret.txt"), []string{"outside the storage roots"}},
			{"/etc/passwd", []string{"outside the storage roots"}},
			{"escape-link", []string{"Cannot upload 'escape-link'", "inside the storage root"}},
			{"escape-dir/secret.txt", []string{"Cannot upload 'escape-dir/secret.txt'", "inside the storage root"}},
			{"no-such-file", []string{"no such file"}},
		} {
			got := s.fail(t, "e2b_create_sandbox", map[string]any{
				"upload_files": []any{
					map[string]any{"session_path": "data.csv"},
					map[string]any{"session_path": c.path, "sandbox_path": "/tmp/x"},
				},
			})
			wantContains(t, got, c.want...)
			wantContains(t, got, "Nothing was created")
			if strings.Contains(got, "top secret") {
				t.Fatalf("refusal leaked the file: %q", got)
			}
		}
		if n := len(e.emu.Sandboxes()); n != 0 {
			t.Fatalf("%d sandboxes were created by refused calls", n)
		}
		// A directory holding a symlink that leads out is refused as a whole.
		if err := os.Symlink(filepath.Join(outside, "secret.txt"), filepath.Join(root, "proj", "src", "leak")); err != nil {
			t.Fatal(err)
		}
		defer os.Remove(filepath.Join(root, "proj", "src", "leak"))
		got := s.fail(t, "e2b_create_sandbox", map[string]any{"upload_files": []any{map[string]any{"session_path": "proj"}}})
		wantContains(t, got, "Cannot upload 'proj'", "inside the storage root")
	}, func(c *Config) { c.StorageRoots = []string{root} })
}

// TestUploadPlanRelativeRoot: a storage root given relative to the working directory still takes absolute paths
// inside it, and the plan names the files to send.
// Not parallel: it changes the working directory, which t.Chdir allows only to a test run alone.
func TestUploadPlanRelativeRoot(t *testing.T) {
	root, outside := makeStorageRoot(t)
	t.Chdir(filepath.Dir(root))
	b := newBase(Deps{Config: Config{StorageRoots: []string{"root"}}})
	plan, err := b.planUploads([]uploadFile{
		{SessionPath: filepath.Join(root, "data.csv")},
		{SessionPath: "proj", SandboxPath: "/w"},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer plan.Close()
	var got []string
	for _, f := range plan.files {
		got = append(got, f.rel+" -> "+f.sandboxPath)
	}
	want := []string{"data.csv -> /home/user/data.csv", "proj/README -> /w/README", "proj/src/main.go -> /w/src/main.go", "proj/src/notes.md -> /w/src/notes.md"}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("plan:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if _, err := b.planUploads([]uploadFile{{SessionPath: filepath.Join(outside, "secret.txt")}}); err == nil {
		t.Fatal("a file outside the root was planned")
	}
}

// A sandbox the store cannot record (here its data key was replaced, as when the keyring entry is lost) is of no
// use: no later call can reach it and adopting it fails the same way. A create, or a fork, fails naming the cause,
// and deletes the new sandbox instead of leaving it running, and billed, until its timeout.
func TestSandboxesThatCannotBeRecordedAreDeleted(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	dir := t.TempDir()
	openWith := func(key byte) {
		st, err := state.Open(dir, state.Options{Keys: state.StaticKeySource(bytes.Repeat([]byte{key}, state.DataKeySize))})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		e.store, e.deps.Store = st, st
	}
	openWith(1)
	s := e.connect(t, eras[0], Caller{Owner: "alice", Session: "main"})
	id := s.createSandbox(t, nil)
	cp := s.ok(t, "e2b_checkpoint_sandbox", map[string]any{"sandbox_id": id})
	s.ok(t, "e2b_manage_sandbox", map[string]any{"sandbox_id": id, "action": "delete"})
	e.store.Close()
	openWith(2)
	s = e.connect(t, eras[0], Caller{Owner: "alice", Session: "main"})

	wantContains(t, s.fail(t, "e2b_create_sandbox", map[string]any{"title": "unrecordable"}), "could not be recorded", "data key", "deleted again")
	wantContains(t, s.fail(t, "e2b_fork_sandbox", map[string]any{"checkpoint_id": cp["checkpoint_id"], "count": 2}), "could not be recorded", "data key", "deleted again")
	list, err := e.e2bClient(t, aliceKey).ListSandboxes(t.Context(), e2b.ListQuery{})
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 0 {
		t.Fatalf("unrecorded sandboxes were left at E2B: %+v", list)
	}
}
