#!/bin/sh
# Installs the assistants below from npm into a prefix of their own and drives each one, headless, against
# e2b-mcp's local backend with a stand-in for its model API (scripts/clients/main.go), inside a network namespace
# with loopback only: nothing reaches a real model, nothing leaves the machine. Flags go to the driver, e.g.
#   scripts/clients/run.sh -clients claude,codex -transports stdio
# `make clients` runs it. Not part of `make test`: it downloads the assistants and needs unshare (util-linux).
set -eu
cd "$(dirname "$0")/../.."
PREFIX=${E2B_MCP_CLIENTS_PREFIX:-${XDG_CACHE_HOME:-$HOME/.cache}/e2b-mcp-clients}
PACKAGES="@anthropic-ai/claude-code@2.1.332 @openai/codex@0.169.0 @google/gemini-cli@0.61.0 @github/copilot@1.0.102"

mkdir -p "$PREFIX"
if [ "$(cat "$PREFIX/.installed" 2>/dev/null)" != "$PACKAGES" ]; then
	# shellcheck disable=SC2086 # one word per package
	npm install --no-audit --no-fund --prefix "$PREFIX" $PACKAGES
	echo "$PACKAGES" >"$PREFIX/.installed"
fi
go build -o bin/e2b-mcp .
go build -o bin/clients ./scripts/clients

# Root makes the namespace itself; anyone else maps themselves to root in a user namespace first.
unshare=unshare
[ "$(id -u)" = 0 ] || unshare="unshare -r"
exec $unshare -n sh -c 'ip link set lo up && exec bin/clients -bin bin/e2b-mcp -prefix "$0" "$@"' "$PREFIX" "$@"
