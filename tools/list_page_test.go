package tools

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/e2b-mcp/e2b-mcp/state"
)

// pageThrough calls a list tool from offset 0 on, following next_offset, and returns the IDs (under idKey) of
// the items of list in the order the pages gave them, and how many pages it took. Every page is within the result
// limit and says how many items there are in all.
func pageThrough(t *testing.T, s *session, tool, list, idKey string, args map[string]any, total int) (ids []string, pages int) {
	t.Helper()
	offset := 0
	for {
		a := map[string]any{"offset": offset}
		for k, v := range args {
			a[k] = v
		}
		res := s.call(t, tool, a)
		if size := resultSize(res); res.IsError || size > MinResultLimit {
			t.Fatalf("%s offset %d: error %v, %d bytes (limit %d): %.300s", tool, offset, res.IsError, size, MinResultLimit, resultText(res))
		}
		got := mustOK(t, tool, res)
		pages++
		if n, _ := got["count"].(float64); int(n) != total {
			t.Fatalf("%s offset %d: count %v, want all %d", tool, offset, got["count"], total)
		}
		items, _ := got[list].([]any)
		for _, it := range items {
			id, _ := it.(map[string]any)[idKey].(string)
			ids = append(ids, id)
		}
		next, _ := got["next_offset"].(float64)
		if truncated, _ := got["truncated"].(bool); !truncated {
			if next != 0 {
				t.Fatalf("%s offset %d: next_offset %v without truncated", tool, offset, next)
			}
			return ids, pages
		}
		if len(items) == 0 || int(next) != offset+len(items) {
			t.Fatalf("%s offset %d: truncated with %d items and next_offset %v", tool, offset, len(items), next)
		}
		offset = int(next)
	}
}

// A list of checkpoints too long for one result (a checkpoint every step gives hundreds) comes in pages within
// the limit, oldest first, that together hold every checkpoint once; past the end the list is empty.
func TestListCheckpointsPaged(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *Config) { c.ResultLimit = MinResultLimit })
	s := e.connect(t, eras[0], Caller{Owner: "alice", Session: "main"})
	const total = 150
	var want []string
	base := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for i := range total {
		cp := state.Checkpoint{ID: fmt.Sprintf("cp_%03d", i), Owner: "alice", Session: "main", SandboxID: "sb_many",
			SnapshotID: fmt.Sprintf("snap_%03d", i), Name: fmt.Sprintf("step %d", i+1), Step: i + 1, Created: base.Add(time.Duration(i) * time.Second)}
		if err := e.store.PutCheckpoint(cp); err != nil {
			t.Fatal(err)
		}
		want = append(want, cp.ID)
	}
	got, pages := pageThrough(t, s, listCheckpointsName, "checkpoints", "checkpoint_id", map[string]any{"sandbox_id": "sb_many"}, total)
	if !slices.Equal(got, want) {
		t.Fatalf("the pages hold %v, want every checkpoint once, oldest first: %v", got, want)
	}
	if pages < 3 {
		t.Errorf("%d checkpoints in %d pages of %d bytes", total, pages, MinResultLimit)
	}
	t.Logf("%d checkpoints in %d pages", total, pages)

	past := s.ok(t, listCheckpointsName, map[string]any{"offset": total + 5})
	if items, _ := past["checkpoints"].([]any); len(items) != 0 || past["truncated"] != nil || past["count"] != float64(total) {
		t.Errorf("past the end: %v", past)
	}
	wantContains(t, s.fail(t, listCheckpointsName, map[string]any{"offset": -1}), "Invalid offset -1")
}

// So does a list of sandboxes.
func TestListSandboxesPaged(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *Config) { c.ResultLimit = MinResultLimit })
	s := e.connect(t, eras[0], Caller{Owner: "alice", Session: "main"})
	const total = 30
	var want []string
	for i := range total {
		want = append(want, s.createSandbox(t, map[string]any{"title": fmt.Sprintf("sandbox number %d of many", i)}))
	}
	got, pages := pageThrough(t, s, listSandboxesName, "sandboxes", "sandbox_id", nil, total)
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("the pages hold %v, want every sandbox once: %v", got, want)
	}
	if pages < 2 {
		t.Errorf("%d sandboxes in %d pages of %d bytes", total, pages, MinResultLimit)
	}
	t.Logf("%d sandboxes in %d pages", total, pages)
}
