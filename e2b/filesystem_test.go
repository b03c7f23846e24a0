package e2b

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"
)

func TestFilesystemWire(t *testing.T) {
	f := newFakeEnvd(t, answerAll)
	e := f.envd(t, "0.6.13")
	ctx := context.Background()
	tests := []struct {
		call func() error
		path string
		body string
	}{
		{func() error { _, err := e.Stat(ctx, "/home/user/f"); return err }, "/filesystem.Filesystem/Stat", `{"path":"/home/user/f"}`},
		{func() error { _, err := e.ListDir(ctx, "/home/user", 0); return err }, "/filesystem.Filesystem/ListDir", `{"path":"/home/user","depth":1}`},
		{func() error { _, err := e.ListDir(ctx, "rel", 3); return err }, "/filesystem.Filesystem/ListDir", `{"path":"rel","depth":3}`},
		{func() error { _, err := e.MakeDir(ctx, "~/d"); return err }, "/filesystem.Filesystem/MakeDir", `{"path":"~/d"}`},
		{func() error { _, err := e.Move(ctx, "a", "b/c"); return err }, "/filesystem.Filesystem/Move", `{"source":"a","destination":"b/c"}`},
		{func() error { return e.Remove(ctx, "/tmp/x") }, "/filesystem.Filesystem/Remove", `{"path":"/tmp/x"}`},
	}
	for _, tt := range tests {
		if err := tt.call(); err != nil {
			t.Fatalf("%s: %v", tt.path, err)
		}
		r := f.last(t)
		if r.method != http.MethodPost || r.path != tt.path || string(r.body) != tt.body ||
			r.header.Get("Content-Type") != "application/json" || r.header.Get("Connect-Protocol-Version") != "1" {
			t.Errorf("%s: sent %s %s %s %v", tt.path, r.method, r.path, r.body, r.header)
		}
	}
	if _, err := e.ListDir(ctx, "/", -1); err == nil {
		t.Error("negative depth accepted")
	}
}

func answer(body string) func(w http.ResponseWriter, r *http.Request, _ []byte) {
	return func(w http.ResponseWriter, r *http.Request, _ []byte) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(body))
	}
}

func TestStatDecodesEntryInfo(t *testing.T) {
	f := newFakeEnvd(t, answer(`{"entry":{"name":"l","type":"FILE_TYPE_FILE","path":"/home/user/l","size":"3526","mode":420,`+
		`"permissions":"Lrwxrwxrwx","owner":"user","group":"user","modifiedTime":"2025-04-18T22:47:34.5Z","symlinkTarget":"/home/user/t",`+
		`"metadata":{"k":"v"},"unknownNewField":1}}`))
	got, err := f.envd(t, "0.6.13").Stat(context.Background(), "l")
	if err != nil {
		t.Fatal(err)
	}
	want := EntryInfo{
		Name: "l", Type: FileTypeFile, Path: "/home/user/l", Size: 3526, Mode: 0o644, Permissions: "Lrwxrwxrwx",
		Owner: "user", Group: "user", ModifiedTime: time.Date(2025, 4, 18, 22, 47, 34, 5e8, time.UTC),
		SymlinkTarget: "/home/user/t", Metadata: map[string]string{"k": "v"},
	}
	if got.ModifiedTime.Equal(want.ModifiedTime) {
		got.ModifiedTime = want.ModifiedTime
	}
	if got.Name != want.Name || got.Type != want.Type || got.Path != want.Path || got.Size != want.Size || got.Mode != want.Mode ||
		got.Permissions != want.Permissions || got.Owner != want.Owner || got.Group != want.Group || got.ModifiedTime != want.ModifiedTime ||
		got.SymlinkTarget != want.SymlinkTarget || got.Metadata["k"] != "v" {
		t.Fatalf("entry %+v\nwant  %+v", got, want)
	}
}

func TestStatDecodesProtoNamesAndZeroValues(t *testing.T) {
	f := newFakeEnvd(t, answer(`{"entry":{"name":"e","type":2,"path":"/e","modified_time":"2024-01-02T03:04:05+02:00","symlink_target":"/x"}}`))
	got, err := f.envd(t, "0.6.13").Stat(context.Background(), "/e")
	if err != nil {
		t.Fatal(err)
	}
	if got.Type != FileTypeDirectory || got.Size != 0 || got.Mode != 0 || got.SymlinkTarget != "/x" ||
		!got.ModifiedTime.Equal(time.Date(2024, 1, 2, 1, 4, 5, 0, time.UTC)) {
		t.Fatalf("entry %+v", got)
	}
	for _, bad := range []string{`{}`, `{"entry":{"modifiedTime":"yesterday"}}`, `{"entry":{"size":"big"}}`} {
		f := newFakeEnvd(t, answer(bad))
		if _, err := f.envd(t, "0.6.13").Stat(context.Background(), "/e"); err == nil || !strings.Contains(err.Error(), "unexpected answer") {
			t.Errorf("answer %s: err = %v", bad, err)
		}
	}
}

func TestListDirLeavesOutUnknownTypes(t *testing.T) {
	f := newFakeEnvd(t, answer(`{"entries":[{"name":"a","type":"FILE_TYPE_FILE","path":"/a"},{"name":"sock","path":"/sock"},`+
		`{"name":"d","type":"FILE_TYPE_DIRECTORY","path":"/d"},{"name":"s","type":"FILE_TYPE_SYMLINK","path":"/s"},{"name":"n","type":"FILE_TYPE_NEW","path":"/n"}]}`))
	got, err := f.envd(t, "0.6.13").ListDir(context.Background(), "/", 1)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range got {
		names = append(names, e.Name+":"+string(e.Type))
	}
	if strings.Join(names, " ") != "a:FILE_TYPE_FILE d:FILE_TYPE_DIRECTORY s:FILE_TYPE_SYMLINK" {
		t.Fatalf("entries %v", names)
	}
	f = newFakeEnvd(t, answer(`{}`))
	if got, err := f.envd(t, "0.6.13").ListDir(context.Background(), "/empty", 1); err != nil || len(got) != 0 {
		t.Fatalf("empty directory: %v %v", got, err)
	}
}

func TestMakeDirAlreadyExists(t *testing.T) {
	f := newFakeEnvd(t, func(w http.ResponseWriter, r *http.Request, _ []byte) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusConflict)
		_, _ = w.Write([]byte(`{"code":"already_exists","message":"directory already exists: /home/user/d"}`))
	})
	created, err := f.envd(t, "0.6.13").MakeDir(context.Background(), "d")
	if created || err != nil {
		t.Fatalf("created %v err %v, want false and no error", created, err)
	}
	f = newFakeEnvd(t, answer(`{"entry":{"name":"d","type":"FILE_TYPE_DIRECTORY","path":"/home/user/d"}}`))
	if created, err := f.envd(t, "0.6.13").MakeDir(context.Background(), "d"); !created || err != nil {
		t.Fatalf("created %v err %v", created, err)
	}
	f = newFakeEnvd(t, func(w http.ResponseWriter, r *http.Request, _ []byte) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		_, _ = w.Write([]byte(`{"code":"invalid_argument","message":"path already exists but it is not a directory: /home/user/f"}`))
	})
	if created, err := f.envd(t, "0.6.13").MakeDir(context.Background(), "f"); created || !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("created %v err %v", created, err)
	}
}
