#!/bin/sh
# Runs every fuzz target of the module (each func FuzzX in a _test.go file) for a short while: their seed corpora
# run in every `go test`, and `make test` goes a little beyond them each time. FUZZTIME sets how long each target
# runs (default 1s); for a real search, run one target for long: go test -run '^$' -fuzz '^FuzzX$' ./pkg.
set -eu
cd "$(dirname "$0")/.."
go=${GO:-go}
fuzztime=${FUZZTIME:-1s}
targets=$(grep -r --include='*_test.go' --exclude-dir=node_modules -o '^func Fuzz[A-Za-z0-9_]*(' . | sort)
if [ -z "$targets" ]; then
	echo "no fuzz targets found" >&2
	exit 1
fi
printf '%s\n' "$targets" | while IFS= read -r t; do
	dir=$(dirname "${t%%:*}")
	name=${t#*:func }
	name=${name%(}
	echo "$go test -run '^\$' -fuzz '^$name\$' -fuzztime $fuzztime $dir"
	"$go" test -run '^$' -fuzz "^$name\$" -fuzztime "$fuzztime" "$dir"
done
