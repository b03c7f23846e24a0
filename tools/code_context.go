package tools

import (
	"context"
	"errors"
	"net/http"

	"github.com/e2b-mcp/e2b-mcp/e2b"
)

type codeContextArgs struct {
	SandboxID string `json:"sandbox_id" jsonschema:"minLength=1" jsonschema_description:"A sandbox of the code-interpreter template."`
	Action    string `json:"action" policy:"action" jsonschema:"enum=create,enum=list,enum=restart,enum=remove" jsonschema_description:"create starts a new context (its own kernel and state); list shows them all, the default ones included; restart clears a context's state; remove ends it."`
	ContextID string `json:"context_id,omitempty" jsonschema_description:"For restart and remove: the context."`
	Language  string `json:"language,omitempty" jsonschema_description:"For create: the context's language (python by default)."`
	Cwd       string `json:"cwd,omitempty" jsonschema_description:"For create: the context's working directory (/home/user by default)."`
}

type codeContextResult struct {
	SandboxID string             `json:"sandbox_id"`
	Action    string             `json:"action"`
	Success   bool               `json:"success"`
	Context   *codeContextEntry  `json:"context,omitempty" jsonschema_description:"For create: the new context; pass its id as context_id to e2b_run_code."`
	Contexts  []codeContextEntry `json:"contexts,omitempty" jsonschema_description:"For list: every context of the sandbox."`
}

type codeContextEntry struct {
	ID       string `json:"id"`
	Language string `json:"language"`
	Cwd      string `json:"cwd"`
}

const codeContextName = "e2b_code_context"

// codeContext is e2b_code_context: the contexts of a sandbox's code interpreter, each a kernel with its own state.
type codeContext struct{ *base }

func (t codeContext) tool() Tool {
	return define(t.base, definition[codeContextArgs, codeContextResult]{
		name: codeContextName,
		description: "Manage the contexts of a code-interpreter sandbox's e2b_run_code: each context is a kernel of " +
			"its own, whose variables and imports other contexts do not see. create one (language, cwd) and pass its " +
			"id as context_id; list them; restart one to clear its state; remove one you no longer need.",
		// A context's restart or removal loses its state.
		hints: hints{readOnly: false, destructive: true, idempotent: false, openWorld: true},
		run:   t.run,
	})
}

func (t codeContext) run(ctx context.Context, call Caller, a *codeContextArgs) (*codeContextResult, error) {
	switch {
	case (a.Action == "restart" || a.Action == "remove") && a.ContextID == "":
		return nil, userErrorf("Missing required parameter: context_id (action %s needs it)", a.Action)
	case a.Action != "create" && (a.Language != "" || a.Cwd != ""):
		return nil, userErrorf("language and cwd are for action create only. Nothing was done.")
	}
	use, err := t.running(ctx, call, a.SandboxID)
	if err != nil {
		return nil, err
	}
	rec := use.rec
	res := codeContextResult{SandboxID: rec.ID, Action: a.Action}
	_, err = withCodeInterpreter(ctx, use.c, rec, func(ci *e2b.CodeInterpreter) (struct{}, error) {
		switch a.Action {
		case "create":
			cc, err := ci.CreateContext(ctx, a.Language, a.Cwd)
			res.Context = &codeContextEntry{ID: cc.ID, Language: cc.Language, Cwd: cc.Cwd}
			return struct{}{}, err
		case "list":
			list, err := ci.ListContexts(ctx)
			res.Contexts = make([]codeContextEntry, len(list))
			for i, cc := range list {
				res.Contexts[i] = codeContextEntry{ID: cc.ID, Language: cc.Language, Cwd: cc.Cwd}
			}
			return struct{}{}, err
		case "restart":
			return struct{}{}, ci.RestartContext(ctx, a.ContextID)
		default:
			return struct{}{}, ci.RemoveContext(ctx, a.ContextID)
		}
	})
	if err != nil {
		var ae *e2b.APIError
		if a.Action == "create" && errors.As(err, &ae) && ae.Status == http.StatusInternalServerError {
			// The server answers 500 for a language it has no kernel for.
			lang := a.Language
			if lang == "" {
				lang = "python"
			}
			return nil, userErrorf("The code interpreter could not start a context for language '%s': %s",
				echo(lang), ae.Message)
		}
		return nil, t.codeFailure(ctx, use.c, call, rec, a.ContextID, err)
	}
	res.Success = true
	return &res, nil
}
