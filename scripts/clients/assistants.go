package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// prompt is what the user asks; the stand-in plays the scenario whatever it says.
const prompt = "Check the e2b sandbox tools: create a sandbox, run commands in it, read a file, then delete it."

// assistant sets up one CLI for a headless session in home: its configuration (e2b-mcp as its MCP server, the
// stand-in as its model API) and the command line and environment that run it.
type assistant struct {
	setup func(home, modelURL string, server mcpServer) (args, env []string, err error)
}

var assistants = map[string]assistant{
	// Claude Code: ANTHROPIC_BASE_URL points it at the stand-in; -p is headless; --allowedTools lets every tool
	// of the server run without a permission prompt.
	"claude": {setup: func(home, modelURL string, server mcpServer) ([]string, []string, error) {
		cfg := map[string]any{"type": "stdio", "command": server.command, "args": server.args}
		if server.url != "" {
			cfg = map[string]any{"type": "http", "url": server.url}
		}
		path := filepath.Join(home, "mcp.json")
		if err := writeJSONFile(path, map[string]any{"mcpServers": map[string]any{"e2b": cfg}}); err != nil {
			return nil, nil, err
		}
		return []string{"claude", "-p", prompt, "--mcp-config", path, "--strict-mcp-config", "--allowedTools", "mcp__e2b",
				"--model", "claude-sonnet-4-5", "--output-format", "text", "--max-turns", "60"},
			[]string{"ANTHROPIC_BASE_URL=" + modelURL, "ANTHROPIC_API_KEY=sk-ant-standin",
				"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1",
				"DISABLE_AUTOUPDATER=1", "MCP_TIMEOUT=60000"}, nil
	}},
	// Codex CLI: a model provider of its own at the stand-in (Responses API); e2b-mcp in config.toml with
	// default_tools_approval_mode = "approve", without which codex exec refuses every tool that is not read-only.
	"codex": {setup: func(home, modelURL string, server mcpServer) ([]string, []string, error) {
		codexHome := filepath.Join(home, ".codex")
		if err := os.MkdirAll(codexHome, 0o755); err != nil {
			return nil, nil, err
		}
		var b strings.Builder
		fmt.Fprintf(&b, "model = \"standin\"\nmodel_provider = \"standin\"\napproval_policy = \"never\"\n")
		fmt.Fprintf(&b, "\n[model_providers.standin]\nname = \"stand-in\"\nbase_url = %s\nwire_api = "+
			"\"responses\"\nenv_key = \"STANDIN_API_KEY\"\n", strconv.Quote(modelURL+"/v1"))
		fmt.Fprintf(&b, "\n[mcp_servers.e2b]\n")
		if server.url != "" {
			fmt.Fprintf(&b, "url = %s\n", strconv.Quote(server.url))
		} else {
			args, _ := json.Marshal(server.args)
			fmt.Fprintf(&b, "command = %s\nargs = %s\n", strconv.Quote(server.command), args)
		}
		fmt.Fprintf(&b, "default_tools_approval_mode = \"approve\"\ntool_timeout_sec = 300\n")
		if err := os.WriteFile(filepath.Join(codexHome, "config.toml"), []byte(b.String()), 0o644); err != nil {
			return nil, nil, err
		}
		return []string{"codex", "exec", "--skip-git-repo-check", prompt},
			[]string{"CODEX_HOME=" + codexHome, "STANDIN_API_KEY=standin"}, nil
	}},
	// Gemini CLI: GOOGLE_GEMINI_BASE_URL points it at the stand-in with an API key; headless it runs only in a
	// trusted folder (GEMINI_CLI_TRUST_WORKSPACE) and declares an MCP server's tools only when the server is trusted.
	"gemini": {setup: func(home, modelURL string, server mcpServer) ([]string, []string, error) {
		cfg := map[string]any{"command": server.command, "args": server.args, "trust": true, "timeout": 600000}
		if server.url != "" {
			cfg = map[string]any{"httpUrl": server.url, "trust": true, "timeout": 600000}
		}
		settings := map[string]any{
			"mcpServers": map[string]any{"e2b": cfg},
			"security":   map[string]any{"auth": map[string]any{"selectedType": "gemini-api-key"}},
			"privacy":    map[string]any{"usageStatisticsEnabled": false},
		}
		if err := writeJSONFile(filepath.Join(home, ".gemini", "settings.json"), settings); err != nil {
			return nil, nil, err
		}
		return []string{"gemini", "-p", prompt, "--model", "gemini-2.5-pro"},
			[]string{"GEMINI_API_KEY=standin", "GOOGLE_GEMINI_BASE_URL=" + modelURL, "GEMINI_CLI_TRUST_WORKSPACE=true"}, nil
	}},
	// GitHub Copilot CLI: BYOK ("bring your own key") with COPILOT_PROVIDER_BASE_URL points it at the stand-in's
	// Chat Completions API, and needs no GitHub sign-in; COPILOT_OFFLINE turns off everything else that would go
	// to GitHub (telemetry, its own GitHub MCP server, updates). Headless (-p), --allow-all-tools lets every tool
	// run without a question. e2b-mcp goes in $COPILOT_HOME/mcp-config.json, as `copilot mcp add` writes it.
	"copilot": {setup: func(home, modelURL string, server mcpServer) ([]string, []string, error) {
		cfg := map[string]any{"type": "local", "command": server.command, "args": server.args, "tools": []string{"*"}}
		if server.url != "" {
			cfg = map[string]any{"type": "http", "url": server.url, "tools": []string{"*"}}
		}
		copilotHome := filepath.Join(home, ".copilot")
		if err := writeJSONFile(filepath.Join(copilotHome, "mcp-config.json"),
			map[string]any{"mcpServers": map[string]any{"e2b": cfg}}); err != nil {
			return nil, nil, err
		}
		return []string{"copilot", "-p", prompt, "--allow-all-tools", "--no-auto-update", "--no-ask-user",
				"--disable-builtin-mcps", "--log-level", "debug", "--log-dir", filepath.Join(home, "logs")},
			[]string{"COPILOT_HOME=" + copilotHome, "COPILOT_OFFLINE=true", "COPILOT_PROVIDER_BASE_URL=" + modelURL + "/v1",
				"COPILOT_PROVIDER_TYPE=openai", "COPILOT_PROVIDER_API_KEY=standin", "COPILOT_MODEL=gpt-4.1"}, nil
	}},
}

func writeJSONFile(path string, v any) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o644)
}
