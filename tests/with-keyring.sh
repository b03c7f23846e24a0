#!/bin/sh
# Runs a command inside a private D-Bus session with an unlocked gnome-keyring, so that code using the Secret
# Service (zalando/go-keyring on Linux) talks to a real keyring, as it does on a desktop. Used by `make test`.
#   tests/with-keyring.sh go test ./...
set -eu
if [ "$#" -eq 0 ]; then
	echo "usage: $0 COMMAND [ARG...]" >&2
	exit 2
fi
for tool in dbus-run-session gnome-keyring-daemon; do
	if ! command -v "$tool" >/dev/null 2>&1; then
		echo "$0: $tool is missing; install dbus and gnome-keyring (see .ci/run)" >&2
		exit 1
	fi
done
# gnome-keyring keeps its files under XDG_DATA_HOME and its control socket under XDG_RUNTIME_DIR: give this run
# its own, so a developer's real keyring is never touched and parallel runs do not meet.
scratch=$(mktemp -d "${TMPDIR:-/tmp}/e2b-mcp-keyring.XXXXXX")
trap 'rm -rf "$scratch"' EXIT INT TERM
mkdir -p "$scratch/data" "$scratch/runtime"
chmod 700 "$scratch/runtime"
export XDG_DATA_HOME="$scratch/data" XDG_RUNTIME_DIR="$scratch/runtime"
# As root, dbus-daemon tries to raise its file limit and may print "Failed to set fd limit"; that is harmless.
# Inside the session: start the daemon unlocked with a throwaway password (printed without a newline: the
# daemon reads the password up to EOF), wait until the Secret Service name is owned, then run the command.
dbus-run-session -- sh -c '
	set -e
	printf %s e2b-mcp-test | gnome-keyring-daemon --unlock --components=secrets --daemonize >/dev/null
	i=0
	until dbus-send --session --print-reply --dest=org.freedesktop.DBus /org/freedesktop/DBus \
		org.freedesktop.DBus.NameHasOwner string:org.freedesktop.secrets 2>/dev/null | grep -q "boolean true"; do
		i=$((i + 1))
		if [ "$i" -gt 100 ]; then
			echo "with-keyring.sh: gnome-keyring-daemon did not register org.freedesktop.secrets" >&2
			exit 1
		fi
		sleep 0.05
	done
	exec "$@"
' with-keyring "$@"
