package audit

import (
	"context"
	"sync"
)

// Transfer is what a call moved between the user's machine and a sandbox: counts and bytes, never contents, so
// that the log answers "what left this machine, and what came back into it" without holding either.
type Transfer struct {
	// FilesIn counts the files, directories and symlinks sent into the sandbox; BytesIn the bytes that left this
	// machine for it (a tar stream's whole length), which a call that failed half-way may have sent without
	// FilesIn.
	FilesIn int   `json:"files_in"`
	BytesIn int64 `json:"bytes_in"`
	// FilesOut counts the files a sync out found changed in the sandbox; BytesOut the bytes of their contents that
	// came back to this machine (the tar stream's whole length).
	FilesOut int   `json:"files_out"`
	BytesOut int64 `json:"bytes_out"`
}

// add sums t and u.
func (t Transfer) add(u Transfer) Transfer {
	return Transfer{FilesIn: t.FilesIn + u.FilesIn, BytesIn: t.BytesIn + u.BytesIn, FilesOut: t.FilesOut + u.FilesOut,
		BytesOut: t.BytesOut + u.BytesOut}
}

// Transfers gathers what one call notes it moved (NoteTransfer) while it runs, for its outcome record.
type Transfers struct {
	mu    sync.Mutex
	total *Transfer
}

type transfersKey struct{}

// WithTransfers returns ctx carrying a new Transfers, into which the call run with it notes what it moves.
func WithTransfers(ctx context.Context) (context.Context, *Transfers) {
	ts := &Transfers{}
	return context.WithValue(ctx, transfersKey{}, ts), ts
}

// NoteTransfer adds t to what the call of ctx moved; nothing when ctx carries no Transfers (a call outside the
// call pipeline).
func NoteTransfer(ctx context.Context, t Transfer) {
	ts, _ := ctx.Value(transfersKey{}).(*Transfers)
	if ts == nil {
		return
	}
	ts.mu.Lock()
	defer ts.mu.Unlock()
	var sum Transfer
	if ts.total != nil {
		sum = *ts.total
	}
	sum = sum.add(t)
	ts.total = &sum
}

// Total is what the call noted it moved; nil when it noted nothing (a call that moves no files).
func (ts *Transfers) Total() *Transfer {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if ts.total == nil {
		return nil
	}
	t := *ts.total
	return &t
}
