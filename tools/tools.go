package tools

import (
	"github.com/mark3labs/mcp-go/server"

	"github.com/e2b-mcp/e2b-mcp/e2b"
	"github.com/e2b-mcp/e2b-mcp/policy"
)

//go:generate go run ../scripts/generate -C ..

// All is every tool of e2b-mcp, in the order clients list them: the six of the capability spec, then checkpoints,
// forks, the per-sandbox checkpoint policy, links for the user to download and upload files and to preview what a
// sandbox serves, background processes, the code interpreter, and the sync of a local directory in and out. A new tool
// is its own file and one line here, then make generate.
func All(d Deps) []Tool {
	b := newBase(d)
	return []Tool{
		createSandbox{b}.tool(),
		execTool{b}.tool(),
		readFile{b}.tool(),
		writeFile{b}.tool(),
		listSandboxes{b}.tool(),
		manageSandbox{b}.tool(),
		checkpointSandbox{b}.tool(),
		listCheckpoints{b}.tool(),
		forkSandbox{b}.tool(),
		deleteCheckpoint{b}.tool(),
		setCheckpointPolicy{b}.tool(),
		fileURL{b, e2b.FileRead}.tool(),
		fileURL{b, e2b.FileWrite}.tool(),
		getURL{b}.tool(),
		listProcesses{b}.tool(),
		readOutput{b}.tool(),
		sendInput{b}.tool(),
		stopProcess{b}.tool(),
		runCode{b, newSettling()}.tool(),
		codeContext{b}.tool(),
		syncIn{b}.tool(),
		syncOut{b}.tool(),
	}
}

// Names lists the tools' names in the order of All, e.g. to check the tool names of a policy file.
func Names() []string {
	return PolicyTools().Names()
}

// PolicyTools is the catalogue policies are parsed against: every tool of All, as the policy sees it.
func PolicyTools() policy.Tools {
	all := All(Deps{})
	list := make([]policy.Tool, len(all))
	for i, t := range all {
		list[i] = t.Policy
	}
	ts, err := policy.NewTools(list)
	if err != nil {
		// The catalogue is fixed at build time and checked by the tests; failing here is a build defect.
		panic(err)
	}
	return ts
}

// ServerTools is what mcp-go serves of the tools.
func ServerTools(all []Tool) []server.ServerTool {
	out := make([]server.ServerTool, len(all))
	for i, t := range all {
		out[i] = t.ServerTool
	}
	return out
}
