package tests

import (
	"context"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// What a sandbox makes reaches the model and the user, end to end with the official TypeScript SDK client
// (tests/js/files.mjs): a chart drawn by python3 as image content that decodes to the same PNG, a clear answer for
// a 20 MB image, sandbox files as resources (and another owner's refused), download and upload links that work
// with a plain HTTP client and stop at their expiry.
func TestFilesImagesResourcesLinks(t *testing.T) {
	t.Parallel()
	node := requireNode(t)
	_, err := exec.LookPath("python3")
	requireEnv(t, err == nil, "python3 is not installed (the sandboxes draw the chart with it)")
	x := newH(t)
	alice, bob := x.owner("alice"), x.owner("bob")
	x.login(alice)
	x.login(bob)
	tokens := x.path("tokens.json")
	aliceTok, bobTok := x.addToken(alice, tokens), x.addToken(bob, tokens)
	srv := x.startHTTP("serve", "--transport", "http", "--tokens-file", tokens,
		"--api-url", the.emu.URL(), "--sandbox-url", the.emu.URL(),
		"--state-dir", x.path("state"), "--policy", x.allowAll())

	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, filepath.Join("js", "files.mjs"), srv.base, aliceTok, bobTok)
	cmd.Env = x.env()
	stdout, stderr := x.capture("node files stdout"), x.capture("node files stderr")
	cmd.Stdout, cmd.Stderr = stdout, stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("files.mjs: %v\nstdout:\n%s\nstderr:\n%s\nserver:\n%s", err, stdout, stderr, srv.stderr)
	}
	last, perr := lastJSONLine(stdout.String())
	if perr != nil || last["step"] != "done" || last["ok"] != true {
		t.Fatalf("files.mjs did not finish its steps:\n%s\nstderr:\n%s", stdout, stderr)
	}
	id := str(last, "sandbox_id")
	the.noteSandbox(id)
	if _, found := the.emu.Sandbox(id); found {
		t.Errorf("files.mjs deleted %s, but the emulator still has it", id)
	}
	t.Logf("files.mjs:\n%s", stdout)
}
