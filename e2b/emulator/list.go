package emulator

import (
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/e2b-mcp/e2b-mcp/e2b/wire"
)

// Listing sandboxes (GET /sandboxes, /v2/sandboxes) with E2B's metadata filter and cursor paging.

// pageItem is one entry of a listing that pages with E2B's cursor: time and ID of the entry.
type pageItem struct {
	t  time.Time
	id string
	v  any
}

// paginate sorts items (newest first, or oldest first when asc; ties by ID), skips those up to the cursor in
// token and cuts a page of limit, returning the token of the next page ("" on the last).
func paginate(items []pageItem, limit int, token string, asc bool) ([]pageItem, string, error) {
	slices.SortFunc(items, func(a, b pageItem) int {
		if !a.t.Equal(b.t) {
			if asc {
				return a.t.Compare(b.t)
			}
			return b.t.Compare(a.t)
		}
		return strings.Compare(a.id, b.id)
	})
	if token != "" {
		ct, cid, err := parseCursor(token, asc)
		if err != nil {
			return nil, "", err
		}
		kept := items[:0]
		for _, it := range items {
			var after bool
			if asc {
				after = it.t.After(ct) || it.t.Equal(ct) && it.id > cid
			} else {
				after = it.t.Before(ct) || it.t.Equal(ct) && it.id > cid
			}
			if after {
				kept = append(kept, it)
			}
		}
		items = kept
	}
	if len(items) <= limit {
		return items, "", nil
	}
	last := items[limit-1]
	return items[:limit], makeCursor(last.t, last.id, asc), nil
}

// makeCursor is E2B's opaque page token: base64url("<RFC3339Nano>__<id>"), with "__asc" for ascending order.
func makeCursor(t time.Time, id string, asc bool) string {
	c := t.UTC().Format(time.RFC3339Nano) + "__" + id
	if asc {
		c += "__asc"
	}
	return base64.URLEncoding.EncodeToString([]byte(c))
}

func parseCursor(token string, asc bool) (time.Time, string, error) {
	raw, err := base64.URLEncoding.DecodeString(token)
	if err != nil {
		return time.Time{}, "", err
	}
	parts := strings.Split(string(raw), "__")
	switch {
	case len(parts) == 2 && !asc, len(parts) == 3 && asc && parts[2] == "asc":
	default:
		return time.Time{}, "", errors.New("invalid cursor")
	}
	t, err := time.Parse(time.RFC3339Nano, parts[0])
	if err != nil {
		return time.Time{}, "", err
	}
	return t, parts[1], nil
}

// parseLimit reads the limit query parameter: default and maximum 100, at least 1.
func parseLimit(q url.Values) (int, *apiError) {
	limit := 100
	if v := q.Get("limit"); v != "" {
		n, err := strconv.ParseInt(v, 10, 32)
		if err != nil || n < 1 {
			return 0, errorf(http.StatusBadRequest, "Invalid format for parameter limit: %q", v)
		}
		limit = int(min(n, 100))
	}
	return limit, nil
}

// parseMetadataFilter decodes the metadata query parameter as E2B's server does (parseFilters): the value is
// query-unescaped as a whole, split on & and =, and each key and value unescaped again.
func parseMetadataFilter(raw string) (map[string]string, error) {
	query, err := url.QueryUnescape(raw)
	if err != nil {
		return nil, err
	}
	filters := map[string]string{}
	for _, pair := range strings.Split(query, "&") {
		parts := strings.Split(pair, "=")
		if len(parts) != 2 {
			return nil, errors.New("invalid key value pair in query")
		}
		k, err := url.QueryUnescape(parts[0])
		if err != nil {
			return nil, err
		}
		v, err := url.QueryUnescape(parts[1])
		if err != nil {
			return nil, err
		}
		filters[k] = v
	}
	return filters, nil
}

func matchesMetadata(md, filter map[string]string) bool {
	for k, v := range filter {
		if got, ok := md[k]; !ok || got != v {
			return false
		}
	}
	return true
}

func (s *Server) handleList(w http.ResponseWriter, r *http.Request, team string) {
	q := r.URL.Query()
	states := map[string]bool{}
	for _, v := range q["state"] {
		for _, st := range strings.Split(v, ",") {
			if st != StateRunning && st != StatePaused {
				WriteError(w, http.StatusBadRequest, fmt.Sprintf("Invalid format for parameter state: value %q is not one "+
					"of the allowed values", st))
				return
			}
			states[st] = true
		}
	}
	if len(states) == 0 {
		states[StateRunning], states[StatePaused] = true, true
	}
	var filter map[string]string
	if q.Has("metadata") {
		f, err := parseMetadataFilter(q.Get("metadata"))
		if err != nil {
			WriteError(w, http.StatusBadRequest, "Error parsing metadata")
			return
		}
		filter = f
	}
	limit, e := parseLimit(q)
	if e != nil {
		writeAPIError(w, e)
		return
	}
	asc := false
	switch o := q.Get("order"); o {
	case "", "desc":
	case "asc":
		asc = true
	default:
		WriteError(w, http.StatusBadRequest, fmt.Sprintf("Invalid format for parameter order: value %q is not one "+
			"of the allowed values", o))
		return
	}
	var startedAfter time.Time
	if v := q.Get("startedAfter"); v != "" {
		t, err := time.Parse(time.RFC3339Nano, v)
		if err != nil {
			WriteError(w, http.StatusBadRequest, fmt.Sprintf("Invalid format for parameter startedAfter: %s", err))
			return
		}
		startedAfter = t
	}
	template := q.Get("template")

	s.mu.Lock()
	var items []pageItem
	running := 0
	for _, sb := range s.sandboxes {
		if sb.Team != team || !states[sb.State] || !matchesMetadata(sb.Metadata, filter) ||
			template != "" && sb.TemplateID != template && sb.Alias != template ||
			sb.StartedAt.Before(startedAfter) {
			continue
		}
		if sb.State == StateRunning {
			running++
		}
		items = append(items, pageItem{t: sb.StartedAt, id: sb.ID, v: listed(sb)})
	}
	s.mu.Unlock()

	page, next, err := paginate(items, limit, q.Get("nextToken"), asc)
	if err != nil {
		WriteError(w, http.StatusBadRequest, "Invalid next token")
		return
	}
	if states[StateRunning] {
		w.Header().Set("X-Total-Running", strconv.Itoa(running))
	}
	writePage[wire.ListedSandbox](w, page, next)
}

// writePage answers one page of a listing: its entries (each item's v a T), and the cursor of the next page in
// X-Next-Token when there is one.
func writePage[T any](w http.ResponseWriter, page []pageItem, next string) {
	if next != "" {
		w.Header().Set("X-Next-Token", next)
	}
	out := make([]T, 0, len(page))
	for _, it := range page {
		out = append(out, it.v.(T))
	}
	writeJSON(w, http.StatusOK, out)
}

// handleListV1 is the deprecated GET /sandboxes: running sandboxes only, no paging.
func (s *Server) handleListV1(w http.ResponseWriter, r *http.Request, team string) {
	var filter map[string]string
	if q := r.URL.Query(); q.Has("metadata") {
		f, err := parseMetadataFilter(q.Get("metadata"))
		if err != nil {
			WriteError(w, http.StatusBadRequest, "Error parsing metadata: "+err.Error())
			return
		}
		filter = f
	}
	s.mu.Lock()
	var items []pageItem
	for _, sb := range s.sandboxes {
		if sb.Team == team && sb.State == StateRunning && matchesMetadata(sb.Metadata, filter) {
			items = append(items, pageItem{t: sb.StartedAt, id: sb.ID, v: listed(sb)})
		}
	}
	s.mu.Unlock()
	page, _, _ := paginate(items, len(items)+1, "", false)
	out := make([]wire.ListedSandbox, 0, len(page))
	for _, it := range page {
		out = append(out, it.v.(wire.ListedSandbox))
	}
	writeJSON(w, http.StatusOK, out)
}
