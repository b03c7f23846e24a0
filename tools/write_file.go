package tools

import (
	"context"
	"errors"
	"fmt"
	"path"
	"strings"

	"github.com/e2b-mcp/e2b-mcp/e2b"
)

const writeFileName = "e2b_write_file"

type writeArgs struct {
	SandboxID string `json:"sandbox_id" jsonschema:"minLength=1" jsonschema_description:"The sandbox to write into."`
	Path      string `json:"path" policy:"path" jsonschema:"minLength=1" jsonschema_description:"File path; relative paths are under /home/user. Missing parent directories are created."`
	Content   string `json:"content" jsonschema_description:"The whole new content of the file (UTF-8 text); an existing file is replaced."`
}

type writeResult struct {
	SandboxID    string `json:"sandbox_id"`
	Resumed      bool   `json:"resumed,omitempty" jsonschema_description:"True when the sandbox had been paused at its timeout and this call resumed it first; its files, and the processes started before, are as they were."`
	Path         string `json:"path" jsonschema_description:"The absolute path written."`
	Success      bool   `json:"success"`
	BytesWritten int    `json:"bytes_written"`
	CheckpointID string `json:"checkpoint_id,omitempty" jsonschema_description:"The checkpoint taken automatically after this step, by the checkpoint policy."`
	Warning      string `json:"warning,omitempty"`
	attachments         // its log, its files, an image
}

// writeFile is e2b_write_file.
type writeFile struct{ *base }

func (t writeFile) tool() Tool {
	desc := fmt.Sprintf("Write a text file in a sandbox, replacing it if it exists and creating missing parent "+
		"directories. content is the whole file, at most %d bytes; for bigger or binary files generate them in the "+
		"sandbox with e2b_exec (e.g. curl, base64 -d).", t.cfg.WriteLimitBytes)
	return define(t.base, definition[writeArgs, writeResult]{
		name: writeFileName, description: desc,
		hints: hints{readOnly: false, destructive: true, idempotent: false, openWorld: true},
		run:   t.run,
	})
}

func (t writeFile) run(ctx context.Context, call Caller, a *writeArgs) (*writeResult, error) {
	switch {
	case len(a.Content) > t.cfg.WriteLimitBytes:
		return nil, userErrorf("content is %d bytes, over the %d-byte limit of e2b_write_file. Write it in smaller "+
			"files, or produce it inside the sandbox with e2b_exec.", len(a.Content), t.cfg.WriteLimitBytes)
	case strings.HasSuffix(a.Path, "/"):
		return nil, userErrorf("path '%s' names a directory; give a file name.", a.Path)
	}
	use, err := t.running(ctx, call, a.SandboxID)
	if err != nil {
		return nil, err
	}
	c := use.c
	rec, err := t.countStep(call, use.rec.ID)
	if err != nil {
		return nil, err
	}
	e := envd(c, rec)
	if dir := path.Dir(a.Path); dir != "." && dir != "/" {
		if _, err := e.MakeDir(ctx, dir); err != nil && !errors.Is(err, e2b.ErrConflict) {
			return nil, t.sandboxFailure(ctx, c, call, rec, err)
		}
	}
	info, err := e.Upload(ctx, a.Path, strings.NewReader(a.Content))
	if err != nil {
		return nil, t.sandboxFailure(ctx, c, call, rec, err)
	}
	res := writeResult{SandboxID: rec.ID, Resumed: use.resumed, Path: a.Path, Success: true, BytesWritten: len(a.Content)}
	if info.Path != "" {
		res.Path = info.Path
	}
	var warning string
	res.CheckpointID, warning = t.afterStep(ctx, c, call, rec, writeFileName)
	res.Warning = joinWarnings(use.warning, warning)
	res.attach(fileLink(rec.ID, res.Path, "the file written"))
	return &res, nil
}
