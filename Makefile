# e2b-mcp: build, test, lint, demo, bench, release. `make test` is the test command; CI (.ci/run) runs it, then
# `make release-check`.
GO       ?= go
BIN      := bin/e2b-mcp
GOFILES   = $(shell find . -name '*.go' -not -path './tests/js/node_modules/*' -not -path './.git/*')
# A private D-Bus session with an unlocked gnome-keyring: the tests use the real Secret Service, never the
# developer's own keyring.
KEYRING  := tests/with-keyring.sh
JS_DEPS  := tests/js/node_modules/.package-lock.json
# The release build (.goreleaser.yaml) and the Claude Desktop bundles made from it (packaging/README.md).
GORELEASER  := bin/goreleaser
BUNDLE_DEPS := packaging/bundle/node_modules/.package-lock.json
# staticcheck at the version packaging/staticcheck/go.mod pins, built as goreleaser is.
STATICCHECK := bin/staticcheck
# The tests of what the release build made in dist/ (tests/dist_test.go): make release-check runs them, make test
# skips them.
RELEASE_TESTS := ^TestReleaseBuild
# This system's bundle of a plain go build, which make test checks and runs without a release build.
DEV_DIR     := bin/dev
DEV_TARGET   = $(shell $(GO) env GOOS)_$(shell $(GO) env GOARCH)
DEV_VERSION  = $(shell cat packaging/VERSION)-dev

.PHONY: all build cross test fuzz fmt-check vet lint demo bench clean prereqs-demo prereqs-test release-snapshot \
	bundle bundle-dev release-check clients generate

all: build

build:
	$(GO) build -o $(BIN) .

# Every file that follows from the tool definitions and the built-in policy (scripts/generate says which): run it
# after changing a tool, and commit what it wrote with the change. Its test fails while any of them is stale.
generate:
	$(GO) generate ./...

# The desktop assistants' own systems: the server must build there (keyring and all) even though its tests run on
# Linux only.
cross:
	GOOS=darwin GOARCH=arm64 $(GO) build -o /dev/null .
	GOOS=windows GOARCH=amd64 $(GO) build -o /dev/null .

fmt-check:
	@out=$$(gofmt -l $(GOFILES)); \
	if [ -n "$$out" ]; then echo "gofmt would change these files (run gofmt -w):"; echo "$$out"; exit 1; fi

vet:
	$(GO) vet ./...
	cd tests/oidcop && $(GO) vet ./...

# What the demo and the tests need, installed when it can be (scripts/prereqs.sh says what it does and why).
prereqs-demo:
	@scripts/prereqs.sh demo

prereqs-test:
	@scripts/prereqs.sh test

# The TypeScript SDK client the end-to-end tests drive; npm ci reinstalls it when the lock file changes.
$(JS_DEPS): tests/js/package-lock.json tests/js/package.json
	cd tests/js && npm ci --no-audit --no-fund

# -count=1: the end-to-end tests build the binary from every package, which go test's result cache cannot see.
# Halves of tests that need what this machine lacks skip and are listed at the end (internal/optional); in CI
# (CI set) a missing dependency the suite itself installs fails instead. The release build's own tests are left to
# make release-check: a release build of every system takes minutes no test run should pay.
# The tests mostly wait (on processes, sandboxes, databases, leases), not compute: a package of end-to-end tests
# keeps about a third of one core busy. So four test binaries run at once (-p) with four parallel tests each, on
# any number of cores, and the packages that take longest are named first, since go test starts them in the
# order given: the longest one then does not start last.
TEST_FLAGS := -race -count=1 -timeout 20m -p 4 -parallel 4 -skip '$(RELEASE_TESTS)'
TEST_PKGS  := ./tests ./tools ./server ./state ./imagesafe ./e2b ./...
test: prereqs-test lint cross $(JS_DEPS) bundle-dev fuzz
	@skips=$$(mktemp); \
	echo "$(KEYRING) $(GO) test $(TEST_FLAGS) $(TEST_PKGS)"; \
	E2B_MCP_SKIP_LOG=$$skips $(KEYRING) $(GO) test $(TEST_FLAGS) $(TEST_PKGS); \
	status=$$?; \
	if [ -s $$skips ]; then echo "optional halves skipped, not run here:"; sort -u $$skips | sed 's/^/  /'; \
	else echo "every optional half ran (the real envd, the TypeScript SDK, the keyring)"; fi; \
	rm -f $$skips; exit $$status

lint: fmt-check vet $(STATICCHECK)
	$(STATICCHECK) ./...
	cd tests/oidcop && ../../$(STATICCHECK) ./...

# staticcheck in a module of its own (packaging/staticcheck), so that its dependencies stay out of e2b-mcp's,
# built once from the Go module proxy.
$(STATICCHECK): packaging/staticcheck/go.mod packaging/staticcheck/go.sum
	cd packaging/staticcheck && $(GO) build -o ../../$(STATICCHECK) honnef.co/go/tools/cmd/staticcheck

# A real session of tool calls against the local backend (sandboxes on this machine; no E2B account, no keyring).
demo: prereqs-demo build
	$(GO) run ./examples/demo -bin $(BIN)

# The real assistants (Claude Code, Codex CLI, Gemini CLI, Copilot CLI) from npm, each driven headless against the
# local backend with a stand-in for its model API, over stdio and streamable HTTP; prints what reached the model.
# Not part of test: it installs the assistants (scripts/clients/run.sh). CLIENTS_FLAGS go to the driver.
clients: prereqs-demo
	scripts/clients/run.sh $(CLIENTS_FLAGS)

# Every fuzz target a second beyond its seed corpus, which `go test` runs anyway (scripts/fuzz.sh; FUZZTIME=30s
# for longer).
fuzz:
	@GO=$(GO) scripts/fuzz.sh

bench: prereqs-test $(JS_DEPS)
	$(KEYRING) $(GO) test -run '^$$' -bench . -benchmem -timeout 20m ./...

# goreleaser at the version packaging/goreleaser/go.mod pins (its own module, so that its dependencies stay out of
# e2b-mcp's), built once from the Go module proxy.
$(GORELEASER): packaging/goreleaser/go.mod packaging/goreleaser/go.sum
	cd packaging/goreleaser && $(GO) build -o ../../$(GORELEASER) github.com/goreleaser/goreleaser/v2

# The archives of every release target and their checksums in dist/, as a release makes them, published nowhere.
release-snapshot: $(GORELEASER)
	$(GORELEASER) release --snapshot --clean

$(BUNDLE_DEPS): packaging/bundle/package-lock.json packaging/bundle/package.json
	cd packaging/bundle && npm ci --no-audit --no-fund

# An MCP Bundle per system from the snapshot's binaries, and the registry entry with their hashes, in dist/bundles/.
bundle: release-snapshot $(BUNDLE_DEPS)
	node packaging/bundle/build.mjs dist

# The release build and its bundles, then the tests of what they hold (CI runs this after make test).
release-check: bundle
	$(KEYRING) $(GO) test -count=1 -timeout 10m -run '$(RELEASE_TESTS)' ./tests

# This system's bundle of a go build in $(DEV_DIR)/bundles/, as the release makes it of its binaries: the tests check
# it and run it over stdio.
bundle-dev: $(BUNDLE_DEPS)
	$(GO) build -trimpath -ldflags "-X github.com/e2b-mcp/e2b-mcp/cli.version=$(DEV_VERSION)" -o $(DEV_DIR)/e2b-mcp .
	node packaging/bundle/build.mjs --binary $(DEV_DIR)/e2b-mcp --target $(DEV_TARGET) --version $(DEV_VERSION) $(DEV_DIR)

clean:
	rm -rf bin dist
