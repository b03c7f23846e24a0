package tests

import (
	"bytes"
	"encoding/json"
	"fmt"
	"image/png"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// What a release carries beside the binary, as the repository keeps it: the version (packaging/VERSION), the
// Claude Desktop bundle's manifest (packaging/bundle/manifest.json) and the MCP Registry entry (server.json),
// checked against the registry's schema (packaging/registry/). What the release build makes of them in dist/ is
// checked in dist_test.go.
const (
	versionPath      = "../packaging/VERSION"
	manifestPath     = "../packaging/bundle/manifest.json"
	iconPath         = "../packaging/bundle/icon.png"
	serverJSONPath   = "../server.json"
	serverSchemaPath = "../packaging/registry/server.schema.json"
	// serverSchemaURL is the $id of the registry's schema that serverSchemaPath is a copy of.
	serverSchemaURL = "https://static.modelcontextprotocol.io/schemas/2025-12-11/server.schema.json"
	repoURL         = "https://github.com/e2b-mcp/e2b-mcp"
)

// releaseTargets are the systems a release has archives and bundles for (.goreleaser.yaml's builds).
var releaseTargets = []struct{ goos, goarch string }{
	{"darwin", "arm64"}, {"darwin", "amd64"}, {"linux", "amd64"}, {"linux", "arm64"}, {"windows", "amd64"},
}

// bundlePlatform is Claude Desktop's name of a Go GOOS, as a bundle's compatibility.platforms lists it.
var bundlePlatform = map[string]string{"darwin": "darwin", "windows": "win32", "linux": "linux"}

// releaseVersion is the version the next release is tagged with, which the registry entry and the bundle carry.
func releaseVersion(t testing.TB) string {
	t.Helper()
	data, err := os.ReadFile(versionPath)
	if err != nil {
		t.Fatal(err)
	}
	v := strings.TrimSpace(string(data))
	if v == "" || strings.HasPrefix(v, "v") {
		t.Fatalf("%s holds %q: want a version without the tag's v, e.g. 1.2.3", versionPath, v)
	}
	return v
}

// bundleManifest is an MCP Bundle's manifest.json (manifest_version 0.3 of Anthropic's mcpb) as far as e2b-mcp's
// uses it, in the order it is written. It is read strictly: a field the manifest gains is added here too, so the
// file keeps one form.
type bundleManifest struct {
	ManifestVersion string `json:"manifest_version"`
	Name            string `json:"name"`
	DisplayName     string `json:"display_name"`
	Version         string `json:"version"`
	Description     string `json:"description"`
	LongDescription string `json:"long_description"`
	Author          struct {
		Name string `json:"name"`
		URL  string `json:"url"`
	} `json:"author"`
	Repository struct {
		Type string `json:"type"`
		URL  string `json:"url"`
	} `json:"repository"`
	Homepage      string `json:"homepage"`
	Documentation string `json:"documentation"`
	Support       string `json:"support"`
	Icon          string `json:"icon"`
	Server        struct {
		Type       string `json:"type"`
		EntryPoint string `json:"entry_point"`
		MCPConfig  struct {
			Command string            `json:"command"`
			Args    []string          `json:"args"`
			Env     map[string]string `json:"env,omitempty"`
		} `json:"mcp_config"`
	} `json:"server"`
	Tools         []manifestTool `json:"tools"`
	Keywords      []string       `json:"keywords"`
	Compatibility struct {
		Platforms []string `json:"platforms"`
	} `json:"compatibility"`
	// UserConfig is what a bundle asks of the user when it is installed; e2b-mcp's asks nothing.
	UserConfig map[string]any `json:"user_config,omitempty"`
}

// manifestTool is a tool as a bundle's manifest lists it (Claude Desktop shows the list before installing).
type manifestTool struct {
	Name        string `json:"name"`
	Description string `json:"description"`
}

func parseManifest(t testing.TB, data []byte) bundleManifest {
	t.Helper()
	var m bundleManifest
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m); err != nil {
		t.Fatalf("manifest.json: %v", err)
	}
	return m
}

// encode is the one form manifest.json is kept in: two-space indents, a final newline, no HTML escaping.
func (m bundleManifest) encode() []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	_ = enc.Encode(m) // strings, and slices and maps of them: nothing that can fail
	return b.Bytes()
}

func readManifest(t testing.TB) bundleManifest {
	t.Helper()
	data, err := os.ReadFile(manifestPath)
	if err != nil {
		t.Fatal(err)
	}
	return parseManifest(t, data)
}

// The manifest's tools, names and descriptions in the server's order (Claude Desktop shows them before
// installing), are written by make generate and checked by scripts/generate's test; the manifest is kept in the one
// form both write.
func TestBundleManifestIsInItsOneForm(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile(manifestPath)
	if err != nil {
		t.Fatal(err)
	}
	if m := parseManifest(t, data); !bytes.Equal(m.encode(), data) {
		t.Errorf("%s is not in its one form (fields in bundleManifest's order, two-space indents)",
			manifestPath)
	}
}

// The bundle runs the binary's serve over stdio and asks for nothing: no API key in Claude Desktop's settings or
// the environment (the key stays in the OS keyring, and a call without one leads to the connect page).
func TestBundleManifestServesWithoutAKey(t *testing.T) {
	t.Parallel()
	m := readManifest(t)
	if m.ManifestVersion != "0.3" || m.Name != "e2b-mcp" || m.Server.Type != "binary" {
		t.Errorf("manifest_version %q, name %q, server.type %q", m.ManifestVersion, m.Name, m.Server.Type)
	}
	if v := releaseVersion(t); m.Version != v {
		t.Errorf("the manifest says version %q, %s %q", m.Version, versionPath, v)
	}
	if m.Server.EntryPoint != "server/e2b-mcp" || m.Server.MCPConfig.Command != "${__dirname}/server/e2b-mcp" ||
		!slices.Equal(m.Server.MCPConfig.Args, []string{"serve"}) {
		t.Errorf("the server is %q %q (entry point %q); want the bundled binary's serve", m.Server.MCPConfig.Command,
			m.Server.MCPConfig.Args, m.Server.EntryPoint)
	}
	if len(m.Server.MCPConfig.Env) != 0 || len(m.UserConfig) != 0 {
		t.Errorf("the bundle sets env %v and asks for %v: the key belongs in the OS keyring", m.Server.MCPConfig.Env, m.UserConfig)
	}
	for name, link := range map[string]string{"homepage": m.Homepage, "documentation": m.Documentation,
		"support": m.Support, "repository": m.Repository.URL, "author": m.Author.URL} {
		if !strings.HasPrefix(link, repoURL) {
			t.Errorf("%s link %q is not the project's", name, link)
		}
	}
	if m.Description == "" || m.LongDescription == "" || m.DisplayName == "" {
		t.Error("the manifest lacks a description, a long description or a display name")
	}
	if m.Icon != "icon.png" {
		t.Fatalf("icon %q; want icon.png beside the manifest", m.Icon)
	}
	f, err := os.Open(iconPath)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cfg, err := png.DecodeConfig(f)
	if err != nil || cfg.Width != 512 || cfg.Height != 512 {
		t.Errorf("icon.png: %dx%d, %v; want a 512x512 PNG (Claude Desktop's size)", cfg.Width, cfg.Height, err)
	}
}

// validateServerJSON checks an MCP Registry entry against the registry's published schema, formats included.
func validateServerJSON(doc []byte) error {
	data, err := os.ReadFile(serverSchemaPath)
	if err != nil {
		return err
	}
	schema, err := jsonschema.UnmarshalJSON(bytes.NewReader(data))
	if err != nil {
		return fmt.Errorf("the registry's schema: %w", err)
	}
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	if err := c.AddResource(serverSchemaURL, schema); err != nil {
		return fmt.Errorf("the registry's schema: %w", err)
	}
	sch, err := c.Compile(serverSchemaURL)
	if err != nil {
		return fmt.Errorf("the registry's schema: %w", err)
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(doc))
	if err != nil {
		return fmt.Errorf("not JSON: %w", err)
	}
	return sch.Validate(inst)
}

// serverJSON is the part of an MCP Registry entry that the checks read.
type serverJSON struct {
	Schema   string `json:"$schema"`
	Name     string `json:"name"`
	Version  string `json:"version"`
	Packages []struct {
		RegistryType string `json:"registryType"`
		Identifier   string `json:"identifier"`
		Version      string `json:"version"`
		FileSha256   string `json:"fileSha256"`
		Transport    struct {
			Type string `json:"type"`
		} `json:"transport"`
	} `json:"packages"`
	Remotes []any `json:"remotes"`
}

func parseServerJSON(t testing.TB, data []byte) serverJSON {
	t.Helper()
	var s serverJSON
	if err := json.Unmarshal(data, &s); err != nil {
		t.Fatalf("server.json: %v", err)
	}
	return s
}

// server.json is valid by the registry's schema, and the schema check is no formality: entries the registry
// refuses fail it.
func TestServerJSONValidByTheRegistrysSchema(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile(serverJSONPath)
	if err != nil {
		t.Fatal(err)
	}
	if err := validateServerJSON(data); err != nil {
		t.Fatalf("server.json: %v", err)
	}
	if s := parseServerJSON(t, data); s.Schema != serverSchemaURL {
		t.Errorf("server.json's $schema is %q; the vendored schema is %q", s.Schema, serverSchemaURL)
	}
	for name, change := range map[string]func(map[string]any){
		"a name without a namespace": func(d map[string]any) { d["name"] = "e2b-mcp" },
		"a description over 100":     func(d map[string]any) { d["description"] = strings.Repeat("x", 101) },
		"no version":                 func(d map[string]any) { delete(d, "version") },
		"a package version latest": func(d map[string]any) {
			d["packages"].([]any)[0].(map[string]any)["version"] = "latest"
		},
		"a package without transport": func(d map[string]any) {
			delete(d["packages"].([]any)[0].(map[string]any), "transport")
		},
		"a website that is no URI": func(d map[string]any) { d["websiteUrl"] = "not a uri" },
	} {
		var d map[string]any
		if err := json.Unmarshal(data, &d); err != nil {
			t.Fatal(err)
		}
		change(d)
		bad, _ := json.Marshal(d)
		if err := validateServerJSON(bad); err == nil {
			t.Errorf("server.json with %s passed the schema", name)
		}
	}
}

// server.json is the release's: its version and its packages' are packaging/VERSION, and its packages are the
// release's bundles on the release's page, one per target (the registry takes no tarballs and no go install; an
// mcpb package is a release asset named by URL). It lists no remote: e2b-mcp is not hosted anywhere.
func TestServerJSONIsTheRelease(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile(serverJSONPath)
	if err != nil {
		t.Fatal(err)
	}
	s := parseServerJSON(t, data)
	v := releaseVersion(t)
	if s.Name != "io.github.e2b-mcp/e2b-mcp" || s.Version != v {
		t.Errorf("server.json is %s %s; want io.github.e2b-mcp/e2b-mcp %s", s.Name, s.Version, v)
	}
	var got, want []string
	for _, p := range s.Packages {
		if p.RegistryType != "mcpb" || p.Version != v || p.Transport.Type != "stdio" || p.FileSha256 != "" {
			t.Errorf("package %s: %s %s over %s, sha %q; want the mcpb of version %s over stdio, its hash left to the build",
				p.Identifier, p.RegistryType, p.Version, p.Transport.Type, p.FileSha256, v)
		}
		got = append(got, p.Identifier)
	}
	for _, target := range releaseTargets {
		want = append(want, fmt.Sprintf("%s/releases/download/v%s/%s", repoURL, v, bundleName(target.goos, target.goarch)))
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("server.json's packages:\n%s\nwant the release's bundles:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if len(s.Remotes) != 0 {
		t.Errorf("server.json lists remotes %v", s.Remotes)
	}
}

// bundleName is the file name of a release's bundle for one target (packaging/bundle/build.mjs names them): no
// version, so that a link to the latest release's stays the same.
func bundleName(goos, goarch string) string {
	return fmt.Sprintf("e2b-mcp_%s_%s.mcpb", goos, goarch)
}

// archiveName is the file name of a release's archive for one target (.goreleaser.yaml's archives).
func archiveName(goos, goarch string) string {
	ext := ".tar.gz"
	if goos == "windows" {
		ext = ".zip"
	}
	return fmt.Sprintf("e2b-mcp_%s_%s%s", goos, goarch, ext)
}

var latestDownload = regexp.MustCompile(regexp.QuoteMeta(repoURL+"/releases/latest/download/") + `([A-Za-z0-9._-]+)`)

// README's Install section links every archive and every bundle of the release by the names the release gives
// them, and nothing else: a link that names no asset is a broken install command.
func TestReadmeInstallLinksAreTheRelease(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile(readmePath)
	if err != nil {
		t.Fatal(err)
	}
	var got, want []string
	for _, m := range latestDownload.FindAllStringSubmatch(string(data), -1) {
		if !slices.Contains(got, m[1]) {
			got = append(got, m[1])
		}
	}
	for _, target := range releaseTargets {
		want = append(want, archiveName(target.goos, target.goarch), bundleName(target.goos, target.goarch))
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("README.md links the release's\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
