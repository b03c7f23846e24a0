package policy

import (
	"context"
	"crypto/sha256"
	"sync"
	"sync/atomic"
	"time"
)

// Holder keeps the policy in force and replaces it when its file changes. A new
// version that does not parse is refused and the old one stays in force: a typo
// while editing must never leave the server without a policy, nor with a laxer one.
type Holder struct {
	tools Tools
	path  string
	cur   atomic.Pointer[Policy]

	mu sync.Mutex // serializes Reload and Watch's checks
	// sum is the hash of the content in force; refused is the hash of the last
	// version refused, so that Watch reports a bad version once, not every tick.
	sum, refused [sha256.Size]byte
	lastErr      string
}

// NewHolder loads the policy at path. With path "" it holds Default() and Reload and
// Watch do nothing.
func (ts Tools) NewHolder(path string) (*Holder, error) {
	h := &Holder{tools: ts, path: path}
	if path == "" {
		h.cur.Store(ts.Default())
		return h, nil
	}
	data, err := readPolicyFile(path)
	if err != nil {
		return nil, err
	}
	p, err := ts.Parse(path, data)
	if err != nil {
		return nil, err
	}
	h.cur.Store(p)
	h.sum = sha256.Sum256(data)
	return h, nil
}

// Path is the policy file, "" for the built-in policy.
func (h *Holder) Path() string { return h.path }

// Current returns the policy in force. Callers evaluate one call against one
// Current() so a reload in the middle cannot mix two versions.
func (h *Holder) Current() *Policy { return h.cur.Load() }

// Reload re-reads the file. On error the policy in force is kept and the error,
// with file and line, is returned for the caller to log.
func (h *Holder) Reload() error {
	if h.path == "" {
		return nil
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	_, err := h.reloadLocked(true)
	return err
}

// reloadLocked reads the file and swaps the policy if the content changed. With
// force unset, a content already refused once is not parsed (nor reported) again.
func (h *Holder) reloadLocked(force bool) (changed bool, err error) {
	data, err := readPolicyFile(h.path)
	if err != nil {
		return false, err
	}
	sum := sha256.Sum256(data)
	if sum == h.sum {
		return false, nil
	}
	if !force && sum == h.refused {
		return false, nil
	}
	p, err := h.tools.Parse(h.path, data)
	if err != nil {
		h.refused = sum
		return false, err
	}
	h.cur.Store(p)
	h.sum = sum
	h.refused = [sha256.Size]byte{}
	return true, nil
}

// Watch polls the file every interval until ctx ends and reloads it when its content
// changes. Content, not modification time, decides: a save within the file system's
// timestamp granularity, or a file replaced by one of the same size, is still seen,
// and a touch without a change does not reload. A policy file is a few kilobytes,
// so reading it each interval costs nothing worth saving. onError (may be nil)
// receives each new problem once: an unreadable file, or a version that is refused.
func (h *Holder) Watch(ctx context.Context, interval time.Duration, onError func(error)) {
	if h.path == "" {
		return
	}
	if interval <= 0 {
		interval = 2 * time.Second
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			h.check(onError)
		}
	}
}

// check is one Watch poll.
func (h *Holder) check(onError func(error)) {
	h.mu.Lock()
	_, err := h.reloadLocked(false)
	report := false
	if err == nil {
		h.lastErr = ""
	} else if msg := err.Error(); msg != h.lastErr {
		h.lastErr = msg
		report = true
	}
	h.mu.Unlock()
	if report && onError != nil {
		onError(err)
	}
}
