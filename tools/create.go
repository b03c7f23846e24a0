package tools

import (
	"context"
	"fmt"

	"github.com/e2b-mcp/e2b-mcp/egress"
	"github.com/e2b-mcp/e2b-mcp/state"
)

const createSandboxName = "e2b_create_sandbox"

type createArgs struct {
	Title          string            `json:"title,omitempty" jsonschema_description:"A short name for the sandbox, shown in listings and on E2B's dashboard."`
	Template       string            `json:"template,omitempty" policy:"template" jsonschema:"minLength=1" jsonschema_description:"E2B template ID or alias to start from."`
	TimeoutSeconds int               `json:"timeout_seconds,omitempty" policy:"timeout_seconds" jsonschema:"minimum=1" jsonschema_description:"Seconds the sandbox may sit unused before E2B pauses or kills it (on_timeout); every call that uses it pushes this back, and a command keeps it alive while it runs."`
	OnTimeout      string            `json:"on_timeout,omitempty" jsonschema:"enum=pause,enum=kill" jsonschema_description:"What E2B does when the timeout runs out: pause keeps memory, files and processes, and the next call that uses the sandbox resumes it; kill deletes it with its files."`
	EnvVars        map[string]string `json:"env_vars,omitempty" jsonschema_description:"Environment variables for every command in the sandbox."`
	UploadFiles    []uploadFile      `json:"upload_files,omitempty" policy:"uploads" jsonschema_description:"Files from the server's storage root to copy into the sandbox (only when the server was started with --storage-root)."`
}

type createResult struct {
	SandboxID      string         `json:"sandbox_id"`
	Status         string         `json:"status" jsonschema_description:"The new sandbox's state: running."`
	Title          string         `json:"title,omitempty"`
	Template       string         `json:"template"`
	WorkspacePath  string         `json:"workspace_path" jsonschema_description:"The working directory of e2b_exec when no cwd is given."`
	TimeoutSeconds int            `json:"timeout_seconds"`
	OnTimeout      string         `json:"on_timeout" jsonschema:"enum=pause,enum=kill" jsonschema_description:"What E2B does when the timeout runs out (see warning when E2B refused what was asked)."`
	FilesUploaded  int            `json:"files_uploaded"`
	Egress         egress.Summary `json:"egress" jsonschema_description:"Set by the server's operator, not by any tool: the credentials (by name and domain) whose headers E2B's egress proxy adds to this sandbox's HTTP(S) requests to that domain, so that e.g. git push to github.com authenticates although no token is in the sandbox; and where the sandbox may connect (allow_out: only there; internet false: nowhere else)."`
	Warning        string         `json:"warning,omitempty" jsonschema_description:"Something went wrong after the sandbox was created; the sandbox exists."`
}

// createSandbox is e2b_create_sandbox.
type createSandbox struct{ *base }

func (t createSandbox) tool() Tool {
	desc := fmt.Sprintf("Create a new E2B cloud sandbox (an isolated Linux VM) for this session. Returns its "+
		"sandbox_id, which the other e2b_ tools take. Defaults: template %q, timeout_seconds %d, on_timeout %s; commands "+
		"run as 'user' in %s. env_vars are set for every command. upload_files copies files or directories from the "+
		"server's storage root (only if the server was started with --storage-root). The sandbox keeps running, and costs "+
		"money, while it is used and for timeout_seconds after; then E2B pauses it (on_timeout pause: the next call "+
		"resumes it as it was) or kills it (kill). e2b_manage_sandbox pauses or deletes it sooner.",
		t.cfg.DefaultTemplate, t.cfg.DefaultTimeoutSeconds, t.cfg.OnTimeout, WorkspacePath)
	return define(t.base, definition[createArgs, createResult]{
		name: createSandboxName, description: desc, readsEgress: true,
		hints: hints{readOnly: false, destructive: false, idempotent: false, openWorld: true},
		defaults: createArgs{Template: t.cfg.DefaultTemplate, TimeoutSeconds: t.cfg.DefaultTimeoutSeconds,
			OnTimeout: t.cfg.OnTimeout},
		shown: t.withUploadTargets,
		run:   t.run,
	})
}

// withUploadTargets replaces upload_files by one entry per file the uploads write, each with the sandbox path it
// lands at, so that a path rule judges every file of a directory upload and the default target of an entry without
// sandbox_path. Uploads that cannot be planned (the tool refuses them) are left as given: the policy then judges
// each entry's own target.
func (t createSandbox) withUploadTargets(args map[string]any) map[string]any {
	uploads, _ := args["upload_files"].([]any)
	if len(uploads) == 0 || len(t.cfg.StorageRoots) == 0 {
		return args
	}
	targets, err := t.uploadTargets(uploads)
	if err != nil {
		return args
	}
	files := make([]any, len(targets))
	for i, f := range targets {
		files[i] = map[string]any{"session_path": f.sessionPath, "sandbox_path": f.sandboxPath}
	}
	out := make(map[string]any, len(args))
	for k, v := range args {
		out[k] = v
	}
	out["upload_files"] = files
	return out
}

func (t createSandbox) run(ctx context.Context, call Caller, a *createArgs) (*createResult, error) {
	template, timeout, onTimeout := a.Template, a.TimeoutSeconds, a.OnTimeout
	if err := checkName("title", a.Title); err != nil {
		return nil, err
	}
	for k := range a.EnvVars {
		if k == "" {
			return nil, userErrorf("Invalid env_vars: a variable name is empty.")
		}
	}
	if err := t.checkNew(call, template, timeout); err != nil {
		return nil, err
	}
	plan, err := t.planUploads(a.UploadFiles)
	if err != nil {
		return nil, err
	}
	defer plan.Close()

	c, err := t.client(ctx, call.Owner)
	if err != nil {
		return nil, err
	}
	net, err := t.egressFor(ctx, call)
	if err != nil {
		return nil, err
	}
	held, err := t.reserve(call, state.SlotNew, 1)
	if err != nil {
		return nil, err
	}
	// The record takes the place; it is given back when E2B refused the create.
	defer held.release()
	sb, onTimeout, lifecycleWarning, err := t.createWithLifecycle(ctx, c, newSandbox(call, template, a.Title, timeout,
		a.EnvVars, net), onTimeout)
	if err != nil {
		return nil, err
	}
	rec := t.newRecord(call, c, sb, a.Title, template, timeout, onTimeout)
	res := createResult{
		SandboxID: sb.SandboxID, Status: state.StateRunning, Title: a.Title, Template: template,
		WorkspacePath: WorkspacePath, TimeoutSeconds: timeout, OnTimeout: onTimeout, Egress: net.Summary,
	}
	if err := held.record(rec); err != nil {
		return nil, &toolError{text: t.unrecorded(ctx, c, call, createSandboxName, sb.SandboxID, timeout, err)}
	}
	warnings := []string{lifecycleWarning, held.warning}
	if len(plan.files) > 0 {
		n, err := plan.upload(ctx, envd(c, rec))
		res.FilesUploaded = n
		if err != nil {
			warnings = append(warnings, fmt.Sprintf("Only %d of %d files were uploaded; %s failed: %s",
				n, len(plan.files), plan.files[n].sandboxPath, t.errorText(ctx, call, createSandboxName, err)))
		}
	}
	res.Warning = joinWarnings(warnings...)
	return &res, nil
}
