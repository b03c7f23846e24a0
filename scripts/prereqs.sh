#!/bin/sh
# Checks what `make demo` or `make test` needs, installs what is missing through the system's package manager when
# it can (as root, or with sudo that needs no password), and otherwise stops at once with the one command to run.
# `make demo`, `make test` and CI (.ci/run) all go through here, so CI proves the path a newcomer takes.
#
#   scripts/prereqs.sh demo    Go, and bubblewrap for the local backend's sandboxes
#   scripts/prereqs.sh test    the above, plus Node.js and npm, a D-Bus session bus, gnome-keyring, secret-tool,
#                              faketime, python3 and the servers and the browser (headless Chromium) the end-to-end
#                              tests start, and Debian's Jupyter, pandas and matplotlib for the code-interpreter tests
set -eu

target=${1:-}
case "$target" in
demo | test) ;;
*)
	echo "usage: $0 demo|test" >&2
	exit 2
	;;
esac

say() { printf 'prereqs: %s\n' "$*" >&2; }

# The local backend isolates sandboxes with bubblewrap and Linux namespaces; there is nothing to install elsewhere.
if [ "$(uname -s)" != Linux ]; then
	say "the local backend runs sandboxes with bubblewrap, which needs Linux; this is $(uname -s)."
	if [ "$target" = demo ]; then
		say "to use e2b-mcp here, connect your E2B key and use the real backend:"
		say "  e2b-mcp auth login && e2b-mcp serve"
		say "or run 'make demo' in a Linux VM or container."
	else
		say "run 'make test' in a Linux VM or container."
	fi
	exit 1
fi

# Go comes from go.dev, not from a distribution (theirs are older than go.mod asks for): check, never install.
repo=$(cd "$(dirname "$0")/.." && pwd)
want_go=$(sed -n 's/^go \([0-9.]*\)$/\1/p' "$repo/go.mod")
if ! command -v go >/dev/null 2>&1; then
	say "Go $want_go or newer is needed and 'go' is not on PATH: install it from https://go.dev/dl/ and add its bin folder to PATH"
	exit 1
fi
have_go=$(go env GOVERSION | sed 's/^go//')
if [ "$(printf '%s\n%s\n' "$want_go" "$have_go" | sort -V | head -n 1)" != "$want_go" ]; then
	say "Go $want_go or newer is needed (go.mod); 'go' on PATH is $have_go: install a newer one from https://go.dev/dl/"
	exit 1
fi

# What each target needs, one line per program: the program to look for, then its package on apt-based systems
# (Debian, Ubuntu) and on dnf-based ones (Fedora).
needs_demo='
bwrap                 bubblewrap        bubblewrap
nsenter               util-linux        util-linux
unshare               util-linux        util-linux
setsid                util-linux        util-linux
'
# The store and replica tests start PostgreSQL (initdb and postgres from /usr/lib/postgresql/*/bin, or PATH) and
# HAProxy; pg_lsclusters is the one program of Debian's postgresql package on PATH.
# (ip and setpriv, with curl, are what ../shared/envd/start.sh needs to run E2B's real envd for the conformance tests.)
# The sandboxes of the background-process and file tests run python3 (a web server, a chart), as E2B's base
# template has it.
needs_test="$needs_demo"'
node                  nodejs            nodejs
npm                   npm               npm
dbus-run-session      dbus              dbus-daemon
dbus-send             dbus              dbus-tools
gnome-keyring-daemon  gnome-keyring     gnome-keyring
secret-tool           libsecret-tools   libsecret
faketime              faketime          libfaketime
ps                    procps            procps-ng
pkill                 procps            procps-ng
ip                    iproute2          iproute
setpriv               util-linux        util-linux
chromium              chromium          chromium
curl                  curl              curl
python3               python3           python3
chromedriver          chromium-driver   chromedriver
patch                 patch             patch
pg_lsclusters         postgresql        postgresql-server
pg_dump               postgresql-client postgresql
haproxy               haproxy           haproxy
'
eval "needs=\$needs_$target"

# The code-interpreter tests run E2B's code-interpreter server and the local backend's code interpreter on
# Debian's Python packages: modules of /usr/bin/python3, not programs on PATH. Only apt names them so; elsewhere
# those tests skip, saying what they lack.
python_modules_test='
fastapi         python3-fastapi
uvicorn         python3-uvicorn
httpx           python3-httpx
websockets      python3-websockets
jupyter_server  python3-jupyter-server
ipykernel       python3-ipykernel
matplotlib      python3-matplotlib
pandas          python3-pandas
'

if command -v apt-get >/dev/null 2>&1; then
	manager=apt
	install="apt-get install -y --no-install-recommends"
elif command -v dnf >/dev/null 2>&1; then
	manager=dnf
	install="dnf install -y"
else
	manager=
fi

# missing prints the packages (for this system's manager) whose programs are not on PATH, each once.
missing() {
	{
		printf '%s\n' "$needs" | while read -r program apt_pkg dnf_pkg; do
			[ -n "$program" ] || continue
			command -v "$program" >/dev/null 2>&1 && continue
			case "$manager" in
			apt) echo "$apt_pkg" ;;
			dnf) echo "$dnf_pkg" ;;
			*) echo "$program" ;;
			esac
		done
		missing_python
	} | sort -u | tr '\n' ' ' | sed 's/ $//'
}

# missing_python prints the apt packages of the Python modules the tests import that python3 lacks.
missing_python() {
	[ "$target" = test ] && [ "$manager" = apt ] || return 0
	printf '%s\n' "$python_modules_test" | while read -r module apt_pkg; do
		[ -n "$module" ] || continue
		/usr/bin/python3 -c "import $module" >/dev/null 2>&1 || echo "$apt_pkg"
	done
}

pkgs=$(missing)
if [ -n "$pkgs" ]; then
	if [ -z "$manager" ]; then
		say "missing: $pkgs; this system has neither apt-get nor dnf: install them with its package manager"
		exit 1
	fi
	if [ "$(id -u)" -eq 0 ]; then
		sudo=
	elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
		sudo="sudo -n"
	else
		if [ "$manager" = apt ]; then
			say "missing packages; run: sudo apt-get update && sudo $install $pkgs"
		else
			say "missing packages; run: sudo $install $pkgs"
		fi
		exit 1
	fi
	say "installing $pkgs"
	if [ "$manager" = apt ]; then
		DEBIAN_FRONTEND=noninteractive $sudo apt-get update -qq
		DEBIAN_FRONTEND=noninteractive $sudo $install -qq $pkgs >/dev/null
	else
		$sudo $install -q $pkgs
	fi
	pkgs=$(missing)
	if [ -n "$pkgs" ]; then
		say "still missing after installing: $pkgs"
		exit 1
	fi
fi

# bubblewrap needs unprivileged user namespaces (or root); some hosts and containers turn them off.
if ! bwrap --ro-bind / / --unshare-all --die-with-parent true 2>/dev/null; then
	say "bubblewrap is installed but cannot create a sandbox here: $(bwrap --ro-bind / / --unshare-all true 2>&1 | head -n 1)"
	say "it needs user namespaces: 'sudo sysctl -w kernel.unprivileged_userns_clone=1' (Debian),"
	say "'sudo sysctl -w kernel.apparmor_restrict_unprivileged_userns=0' (Ubuntu 24.04+), or a container run with --privileged"
	exit 1
fi

if [ "$target" = test ]; then
	node_major=$(node -p 'process.versions.node.split(".")[0]')
	if [ "$node_major" -lt 20 ]; then
		say "Node.js 20 or newer is needed for the TypeScript MCP SDK (tests/js); 'node' on PATH is $(node --version): see https://nodejs.org/en/download"
		exit 1
	fi
fi
