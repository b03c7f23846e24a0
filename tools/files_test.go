package tools

import (
	"strings"
	"testing"
)

func TestWriteThenRead(t *testing.T) {
	t.Parallel()
	forEachEra(t, func(t *testing.T, e *env, s *session) {
		id := s.createSandbox(t, nil)
		content := "first\nsecond <tag> & \"quotes\"\nthird ünïcode\n"
		res := s.ok(t, "e2b_write_file", map[string]any{"sandbox_id": id, "path": "deep/new/dir/notes.txt", "content": content})
		if res["success"] != true || res["path"] != "/home/user/deep/new/dir/notes.txt" || num(res["bytes_written"]) != len(content) {
			t.Fatalf("write: %v", res)
		}
		read := s.ok(t, "e2b_read_file", map[string]any{"sandbox_id": id, "path": "/home/user/deep/new/dir/notes.txt"})
		if read["content"] != content || read["truncated"] != false || num(read["lines"]) != 3 || num(read["size"]) != len(content) {
			t.Fatalf("read: %v", read)
		}
		// An empty content is a real (empty) file, and an existing file is replaced.
		s.ok(t, "e2b_write_file", map[string]any{"sandbox_id": id, "path": "deep/new/dir/notes.txt", "content": ""})
		read = s.ok(t, "e2b_read_file", map[string]any{"sandbox_id": id, "path": "deep/new/dir/notes.txt"})
		if read["content"] != "" || num(read["size"]) != 0 || read["truncated"] != false {
			t.Fatalf("read after emptying: %v", read)
		}
		rec, _ := e.store.Sandbox("alice", id)
		if rec.Steps != 2 {
			t.Fatalf("steps = %d, want 2 (reads are not steps)", rec.Steps)
		}
	})
}

func TestWriteLimit(t *testing.T) {
	t.Parallel()
	forEachEra(t, func(t *testing.T, e *env, s *session) {
		id := s.createSandbox(t, nil)
		got := s.fail(t, "e2b_write_file", map[string]any{"sandbox_id": id, "path": "big.txt", "content": strings.Repeat("x", 1025)})
		wantContains(t, got, "content is 1025 bytes, over the 1024-byte limit")
		res := s.exec(t, id, "test -e big.txt && echo exists || echo absent")
		if res["stdout"] != "absent\n" {
			t.Fatal("a refused write left a file")
		}
		s.ok(t, "e2b_write_file", map[string]any{"sandbox_id": id, "path": "ok.txt", "content": strings.Repeat("x", 1024)})
	}, func(c *Config) { c.WriteLimitBytes = 1024 })
}

func TestReadOffsetLimit(t *testing.T) {
	t.Parallel()
	forEachEra(t, func(t *testing.T, e *env, s *session) {
		id := s.createSandbox(t, nil)
		s.exec(t, id, "seq 1 50 > n.txt")
		res := s.ok(t, "e2b_read_file", map[string]any{"sandbox_id": id, "path": "n.txt", "offset": 10, "limit": 3})
		if res["content"] != "10\n11\n12\n" || num(res["start_line"]) != 10 || num(res["lines"]) != 3 ||
			res["truncated"] != true || num(res["next_offset"]) != 13 {
			t.Fatalf("offset 10 limit 3: %v", res)
		}
		res = s.ok(t, "e2b_read_file", map[string]any{"sandbox_id": id, "path": "n.txt", "offset": 48})
		if res["content"] != "48\n49\n50\n" || res["truncated"] != false || res["next_offset"] != nil {
			t.Fatalf("offset 48: %v", res)
		}
		res = s.ok(t, "e2b_read_file", map[string]any{"sandbox_id": id, "path": "n.txt", "offset": 60})
		if res["content"] != "" {
			t.Fatalf("offset past the end: %v", res)
		}
		wantContains(t, res["note"].(string), "fewer than 60 lines")
		res = s.ok(t, "e2b_read_file", map[string]any{"sandbox_id": id, "path": "n.txt", "limit": 50})
		if res["content"] != seqOutput(50) || res["truncated"] != false {
			t.Fatalf("exactly all lines: %v", res)
		}
		got := s.fail(t, "e2b_read_file", map[string]any{"sandbox_id": id, "path": "n.txt", "offset": -1})
		wantContains(t, got, "Invalid offset -1")
	})
}

func TestReadRefusals(t *testing.T) {
	t.Parallel()
	forEachEra(t, func(t *testing.T, e *env, s *session) {
		id := s.createSandbox(t, nil)
		got := s.fail(t, "e2b_read_file", map[string]any{"sandbox_id": id, "path": "/home/user"})
		wantContains(t, got, "'/home/user' is a directory", "ls -la")
		got = s.fail(t, "e2b_read_file", map[string]any{"sandbox_id": id, "path": "missing.txt"})
		wantContains(t, got, "No such file in sandbox '"+id+"': missing.txt")
	})
}

func TestReadBinary(t *testing.T) {
	t.Parallel()
	forEachEra(t, func(t *testing.T, e *env, s *session) {
		id := s.createSandbox(t, nil)
		s.exec(t, id, `head -c 100000 /dev/urandom > blob.bin; printf 'abc\000def\nline2\n' > nul.bin`)
		for _, p := range []string{"blob.bin", "nul.bin"} {
			res := s.ok(t, "e2b_read_file", map[string]any{"sandbox_id": id, "path": p})
			if res["binary"] != true || res["content"] != "" {
				t.Fatalf("%s: %v", p, res)
			}
			wantContains(t, res["note"].(string), "binary file (", "xxd", "base64", "offset/limit")
		}
		// Asked for explicitly, the lines come anyway, with non-UTF-8 bytes replaced.
		res := s.ok(t, "e2b_read_file", map[string]any{"sandbox_id": id, "path": "nul.bin", "limit": 1})
		if res["content"] != "abc\x00def\n" || res["truncated"] != true {
			t.Fatalf("explicit range of a binary file: %v", res)
		}
		// UTF-8 text whose multi-byte characters straddle the sniffed head is text.
		s.exec(t, id, `printf 'é%.0s' $(seq 1 5000) > utf.txt; echo >> utf.txt`)
		res = s.ok(t, "e2b_read_file", map[string]any{"sandbox_id": id, "path": "utf.txt"})
		if res["binary"] != nil || res["content"] != strings.Repeat("é", 5000)+"\n" {
			t.Fatalf("utf-8 text read as binary: binary=%v, %d bytes", res["binary"], len(res["content"].(string)))
		}
	})
}

// TestReadHugeFile: a file far bigger than the result limit is read only as far as needed.
func TestReadHugeFile(t *testing.T) {
	t.Parallel()
	const limit = MinResultLimit
	forEachEra(t, func(t *testing.T, e *env, s *session) {
		id := s.createSandbox(t, nil)
		s.exec(t, id, "seq 1 200000 > huge.txt")
		raw := s.call(t, "e2b_read_file", map[string]any{"sandbox_id": id, "path": "huge.txt"})
		if n := sentSize(t, raw); n > limit {
			t.Fatalf("%d bytes as sent, over the %d limit", n, limit)
		}
		res := mustOK(t, "e2b_read_file", raw)
		content := res["content"].(string)
		if len(content) > limit || !strings.HasPrefix(seqOutput(200000), content) || !strings.HasSuffix(content, "\n") {
			t.Fatalf("content is %d bytes: %q...", len(content), content[:min(40, len(content))])
		}
		lines := strings.Count(content, "\n")
		if res["truncated"] != true || num(res["lines"]) != lines || num(res["next_offset"]) != lines+1 {
			t.Fatalf("result %v", res)
		}
		// The next read continues where this one stopped.
		next := s.ok(t, "e2b_read_file", map[string]any{"sandbox_id": id, "path": "huge.txt", "offset": lines + 1, "limit": 2})
		if want := seqOutput(lines + 2)[len(content):]; next["content"] != want {
			t.Fatalf("continued read %q, want %q", next["content"], want)
		}
		// One line longer than the limit comes back cut, with a note.
		s.exec(t, id, "head -c 10000 /dev/zero | tr '\\0' 'x' > long.txt; echo >> long.txt; echo after >> long.txt")
		raw = s.call(t, "e2b_read_file", map[string]any{"sandbox_id": id, "path": "long.txt"})
		if n := sentSize(t, raw); n > limit {
			t.Fatalf("a long line: %d bytes as sent, over the %d limit", n, limit)
		}
		res = mustOK(t, "e2b_read_file", raw)
		long := res["content"].(string)
		if len(long) < limit/4 || strings.Trim(long, "x") != "" || res["truncated"] != true || num(res["next_offset"]) != 2 {
			t.Fatalf("long line: %d bytes, %v", len(long), res["next_offset"])
		}
		wantContains(t, res["note"].(string), "line 1 is longer than one result holds (the result limit is 4096 characters)")
		res = s.ok(t, "e2b_read_file", map[string]any{"sandbox_id": id, "path": "long.txt", "offset": 2})
		if res["content"] != "after\n" {
			t.Fatalf("after the long line: %v", res)
		}
	}, func(c *Config) { c.ResultLimit = limit })
}
