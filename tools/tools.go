package tools

import (
	"github.com/mark3labs/mcp-go/server"

	"github.com/e2b-mcp/e2b-mcp/e2b"
)

// All is every tool of e2b-mcp, in the order clients list them: the six of the capability spec, then
// checkpoints, forks, the per-sandbox checkpoint policy, links for the user to download and upload files, and
// background processes.
func All(d Deps) []server.ServerTool {
	b := newBase(d)
	return []server.ServerTool{
		createSandbox{b}.serverTool(),
		execTool{b}.serverTool(),
		readFile{b}.serverTool(),
		writeFile{b}.serverTool(),
		listSandboxes{b}.serverTool(),
		manageSandbox{b}.serverTool(),
		checkpointSandbox{b}.serverTool(),
		listCheckpoints{b}.serverTool(),
		forkSandbox{b}.serverTool(),
		deleteCheckpoint{b}.serverTool(),
		setCheckpointPolicy{b}.serverTool(),
		fileURL{b, e2b.FileRead}.serverTool(),
		fileURL{b, e2b.FileWrite}.serverTool(),
		listProcesses{b}.serverTool(),
		stopProcess{b}.serverTool(),
	}
}

// Names lists the tools' names in the order of All, e.g. to check the tool names of a policy file.
func Names() []string {
	all := All(Deps{})
	names := make([]string, len(all))
	for i, t := range all {
		names[i] = t.Tool.Name
	}
	return names
}
