package server

import (
	"bytes"
	"encoding/json"
	"io"
	"sync"
	"testing"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"

	"github.com/e2b-mcp/e2b-mcp/e2b/e2btest"
	"github.com/e2b-mcp/e2b-mcp/tools"
)

// responseSizes records, for each tool result the server writes on stdout, the size of each copy a client may
// hand its model: the text content, and structuredContent's JSON (the larger of the two).
type responseSizes struct {
	w       *io.PipeWriter
	mu      sync.Mutex
	pending []byte
	sizes   []int
}

// copySize is the size of the larger copy of a result as a client reads it off the wire.
func copySize(raw json.RawMessage) int {
	var res struct {
		Content []struct {
			Text string `json:"text"`
		} `json:"content"`
		StructuredContent json.RawMessage `json:"structuredContent"`
	}
	if json.Unmarshal(raw, &res) != nil {
		return -1
	}
	text := 0
	for _, c := range res.Content {
		text += len(c.Text)
	}
	return max(text, len(res.StructuredContent))
}

func (r *responseSizes) Write(p []byte) (int, error) {
	r.mu.Lock()
	r.pending = append(r.pending, p...)
	for {
		i := bytes.IndexByte(r.pending, '\n')
		if i < 0 {
			break
		}
		var msg struct {
			Result json.RawMessage `json:"result"`
		}
		if json.Unmarshal(r.pending[:i], &msg) == nil && len(msg.Result) > 0 {
			r.sizes = append(r.sizes, copySize(msg.Result))
		}
		r.pending = r.pending[i+1:]
	}
	r.mu.Unlock()
	return r.w.Write(p)
}

// The result limit holds for what a model reads, as the client receives it off the wire: over stdio, in both
// eras, a call whose output fills the limit is answered with each copy of its result (the text content, the
// structuredContent) within the limit, and near it: the limit is each copy's, not their sum.
func TestResultLimitEachCopyOnTheWire(t *testing.T) {
	const limit = tools.MinResultLimit
	for _, version := range eras {
		t.Run(version, func(t *testing.T) {
			f := newFixture(t, fixtureOpts{mutate: func(c *Config, _ *e2btest.Server) { c.Tools.ResultLimit = limit }})
			inR, inW := io.Pipe()
			outR, outW := io.Pipe()
			sizes := &responseSizes{w: outW}
			done := make(chan error, 1)
			go func() {
				done <- f.srv.Run(t.Context(), inR, sizes)
				outW.Close()
			}()
			c := client.NewClient(transport.NewIO(outR, inW, nil), client.WithProtocolVersion(version))
			initialize(t, c, version)
			id := createSandbox(t, c)
			sizes.mu.Lock()
			before := len(sizes.sizes)
			sizes.mu.Unlock()

			// Output far over the limit, cut to fill it; a file read in pages that fill it. Neither has a line end, so
			// the cuts fall to the byte.
			exec := mustOK(t, c, "e2b_exec", map[string]any{"sandbox_id": id, "command": "head -c 30000 /dev/zero | tr '\\0' x; head -c 30000 /dev/zero | tr '\\0' x > /tmp/big"})
			if exec["truncated"] != true {
				t.Fatalf("the output was not cut to the limit: %v", exec)
			}
			if page := mustOK(t, c, "e2b_read_file", map[string]any{"sandbox_id": id, "path": "/tmp/big"}); page["truncated"] != true {
				t.Fatalf("the file was not cut to the limit: %v", page)
			}
			c.Close()
			if err := awaitRun(t, done); err != nil {
				t.Fatal(err)
			}

			sizes.mu.Lock()
			defer sizes.mu.Unlock()
			answers := sizes.sizes[before:]
			if len(answers) != 2 {
				t.Fatalf("%d responses recorded for the two calls", len(answers))
			}
			for i, n := range answers {
				tool := []string{"e2b_exec", "e2b_read_file"}[i]
				if n > limit {
					t.Errorf("a copy of the result of %s is %d bytes as the client reads it, over the result limit of %d", tool, n, limit)
				}
				// The limit is used, not merely kept: a result cut far short of it would pass the test above.
				if n < limit*9/10 {
					t.Errorf("the result of %s is %d bytes, not near the limit of %d", tool, n, limit)
				}
			}
		})
	}
}
