package tests

import (
	"archive/tar"
	"archive/zip"
	"bufio"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"debug/elf"
	"debug/macho"
	"debug/pe"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/e2b-mcp/e2b-mcp/internal/optional"
)

// What the release build makes in dist/: goreleaser's archives and checksums (make release-snapshot) and the
// bundles and registry entry made from them (make bundle, packaging/bundle/build.mjs). `make release-check` makes
// them and runs the tests named TestReleaseBuild..., which `make test` skips: in CI a missing dist/ fails them,
// elsewhere they skip until `make bundle` has run.
const distDir = "../dist"

// devBundleDir holds this system's bundle of a plain go build (make bundle-dev, which make test runs first): the
// bundle's checks without a release build.
const devBundleDir = "../bin/dev/bundles"

// snapshot is the release build in dist/, as its metadata.json describes it.
type snapshot struct {
	Version string `json:"version"`
	Commit  string `json:"commit"`
}

func requireSnapshot(t *testing.T) snapshot {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(distDir, "metadata.json"))
	if os.IsNotExist(err) {
		optional.MissingFromRelease(t, "no release build in dist/")
	}
	if err != nil {
		t.Fatal(err)
	}
	var s snapshot
	if err := json.Unmarshal(data, &s); err != nil {
		t.Fatalf("dist/metadata.json: %v", err)
	}
	if want := releaseVersion(t) + "-snapshot"; s.Version != want {
		t.Fatalf("dist/ holds version %q, not %q: rebuild it with make bundle", s.Version, want)
	}
	return s
}

func exeName(goos string) string {
	if goos == "windows" {
		return "e2b-mcp.exe"
	}
	return "e2b-mcp"
}

func sha256Hex(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}

// archiveFiles is every regular file of a release archive (tar.gz or zip) by name, with its mode.
func archiveFiles(t *testing.T, path string) map[string]archived {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]archived{}
	if strings.HasSuffix(path, ".zip") {
		return zipFiles(t, data)
	}
	gz, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	tr := tar.NewReader(gz)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return files
		}
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if h.Typeflag != tar.TypeReg {
			continue
		}
		body, err := io.ReadAll(tr)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		files[h.Name] = archived{data: body, mode: h.FileInfo().Mode()}
	}
}

type archived struct {
	data []byte
	mode os.FileMode
}

func zipFiles(t *testing.T, data []byte) map[string]archived {
	t.Helper()
	zr, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]archived{}
	for _, f := range zr.File {
		if f.FileInfo().IsDir() {
			continue
		}
		rc, err := f.Open()
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(rc)
		rc.Close()
		if err != nil {
			t.Fatalf("%s: %v", f.Name, err)
		}
		files[f.Name] = archived{data: body, mode: f.Mode()}
	}
	return files
}

// executableFor says whether bin is an executable of goos/goarch, by its headers.
func executableFor(bin []byte, goos, goarch string) error {
	r := bytes.NewReader(bin)
	switch goos {
	case "linux":
		f, err := elf.NewFile(r)
		if err != nil {
			return err
		}
		if want := map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}[goarch]; f.Machine != want {
			return fmt.Errorf("an ELF for %v, not %v", f.Machine, want)
		}
	case "darwin":
		f, err := macho.NewFile(r)
		if err != nil {
			return err
		}
		if want := map[string]macho.Cpu{"amd64": macho.CpuAmd64, "arm64": macho.CpuArm64}[goarch]; f.Cpu != want {
			return fmt.Errorf("a Mach-O for %v, not %v", f.Cpu, want)
		}
	case "windows":
		f, err := pe.NewFile(r)
		if err != nil {
			return err
		}
		if f.Machine != pe.IMAGE_FILE_MACHINE_AMD64 {
			return fmt.Errorf("a PE for machine %#x, not amd64", f.Machine)
		}
	default:
		return fmt.Errorf("no check for %s", goos)
	}
	return nil
}

var versionLine = regexp.MustCompile(`^e2b-mcp (\S+) \(commit ([0-9a-f]{40}), go[0-9.]+, (\w+)/(\w+)\)\n$`)

// `make release-snapshot` makes an archive per target, each with the binary for that system, the README and the
// LICENSE, and checksums.txt that holds each archive's SHA-256; this system's binary says the snapshot's version
// and commit.
func TestReleaseBuildArchives(t *testing.T) {
	snap := requireSnapshot(t)
	if ok, _ := regexp.MatchString(`^[0-9a-f]{40}$`, snap.Commit); !ok {
		t.Fatalf("dist/metadata.json's commit %q is no commit", snap.Commit)
	}
	if out, err := exec.Command("git", "-C", "..", "cat-file", "-t", snap.Commit).Output(); err != nil || strings.TrimSpace(string(out)) != "commit" {
		t.Errorf("the snapshot's commit %s is not one of this repository: %v", snap.Commit, err)
	}

	sums := map[string]string{}
	data, err := os.ReadFile(filepath.Join(distDir, "checksums.txt"))
	if err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		sum, name, ok := strings.Cut(sc.Text(), "  ")
		if !ok {
			t.Fatalf("checksums.txt line %q", sc.Text())
		}
		sums[name] = sum
	}
	var names []string
	for _, target := range releaseTargets {
		name := archiveName(target.goos, target.goarch)
		names = append(names, name)
		archive, err := os.ReadFile(filepath.Join(distDir, name))
		if err != nil {
			t.Errorf("no archive for %s/%s: %v", target.goos, target.goarch, err)
			continue
		}
		if got := sha256Hex(archive); sums[name] != got {
			t.Errorf("%s: checksums.txt says %q, the file's SHA-256 is %s", name, sums[name], got)
		}
		files := archiveFiles(t, filepath.Join(distDir, name))
		bin, ok := files[exeName(target.goos)]
		if !ok {
			t.Errorf("%s holds no %s: %v", name, exeName(target.goos), slices.Sorted(maps.Keys(files)))
			continue
		}
		for _, doc := range []string{"README.md", "LICENSE"} {
			if _, ok := files[doc]; !ok {
				t.Errorf("%s holds no %s", name, doc)
			}
		}
		if err := executableFor(bin.data, target.goos, target.goarch); err != nil {
			t.Errorf("%s's %s: %v", name, exeName(target.goos), err)
		}
		if target.goos != "windows" && bin.mode&0o111 == 0 {
			t.Errorf("%s's binary is not executable (%v)", name, bin.mode)
		}
		if target.goos != runtime.GOOS || target.goarch != runtime.GOARCH {
			continue
		}
		path := filepath.Join(t.TempDir(), "e2b-mcp")
		if err := os.WriteFile(path, bin.data, 0o755); err != nil {
			t.Fatal(err)
		}
		out, err := exec.Command(path, "version").Output()
		want := fmt.Sprintf("e2b-mcp %s (commit %s, go", snap.Version, snap.Commit)
		if err != nil || !versionLine.Match(out) || !strings.HasPrefix(string(out), want) {
			t.Errorf("the snapshot's e2b-mcp version: %q, %v; want %q...", out, err, want)
		}
	}
	if got := slices.Sorted(maps.Keys(sums)); !slices.Equal(got, slices.Sorted(slices.Values(names))) {
		t.Errorf("checksums.txt covers %v; want the archives %v", got, names)
	}
}

// `make bundle` makes a bundle per target (each checked by checkBundle) whose binary is the very binary of that
// target's archive, and the registry entry of the build, valid by the registry's schema, with each bundle's
// SHA-256. This system's bundle runs over stdio.
func TestReleaseBuildBundles(t *testing.T) {
	snap := requireSnapshot(t)
	entryData, err := os.ReadFile(filepath.Join(distDir, "bundles", "server.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := validateServerJSON(entryData); err != nil {
		t.Errorf("dist/bundles/server.json: %v", err)
	}
	entry := parseServerJSON(t, entryData)
	hashes := map[string]string{}
	for _, p := range entry.Packages {
		hashes[filepath.Base(p.Identifier)] = p.FileSha256
		if p.Version != snap.Version {
			t.Errorf("dist/bundles/server.json: package %s is of version %q", p.Identifier, p.Version)
		}
	}

	for _, target := range releaseTargets {
		name := bundleName(target.goos, target.goarch)
		path := filepath.Join(distDir, "bundles", name)
		data, err := os.ReadFile(path)
		if err != nil {
			t.Errorf("no bundle for %s/%s: %v", target.goos, target.goarch, err)
			continue
		}
		if got := sha256Hex(data); hashes[name] != got {
			t.Errorf("dist/bundles/server.json says %s has SHA-256 %q; it has %s", name, hashes[name], got)
		}
		exe := exeName(target.goos)
		files := zipFiles(t, data)
		bin := checkBundle(t, name, files, snap.Version, target.goos)
		archived := archiveFiles(t, filepath.Join(distDir, archiveName(target.goos, target.goarch)))[exe]
		if len(bin) == 0 || !bytes.Equal(bin, archived.data) {
			t.Errorf("%s's %s is not the binary of the release archive", name, exe)
		}
		if target.goos == runtime.GOOS && target.goarch == runtime.GOARCH {
			runBundleOverStdio(t, files)
		}
	}
}

// This system's bundle of a go build (make bundle-dev) is made as a release's are (checkBundle), and it runs over
// stdio: the bundle's checks need no release build.
func TestDevBundle(t *testing.T) {
	t.Parallel()
	name := bundleName(runtime.GOOS, runtime.GOARCH)
	path := filepath.Join(devBundleDir, name)
	data, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		optional.Missing(t, "no bundle in "+devBundleDir+" (make bundle-dev makes it)")
	}
	if err != nil {
		t.Fatal(err)
	}
	version := releaseVersion(t) + "-dev"
	bin := filepath.Join(t.TempDir(), exeName(runtime.GOOS))
	files := zipFiles(t, data)
	if err := os.WriteFile(bin, checkBundle(t, name, files, version, runtime.GOOS), 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(bin, "version").Output(); err != nil || !strings.HasPrefix(string(out), "e2b-mcp "+version+" (") {
		t.Errorf("the bundle's e2b-mcp version: %q, %v; want e2b-mcp %s", out, err, version)
	}
	runBundleOverStdio(t, files)
}

// checkBundle checks a bundle (named name, of a build of the given version for goos, files unzipped): the
// repository's manifest with the build's version and that system's command and platform, the icon, and its binary,
// executable, which it returns.
func checkBundle(t *testing.T, name string, files map[string]archived, version, goos string) []byte {
	t.Helper()
	committed := readManifest(t)
	m := parseManifest(t, files["manifest.json"].data)
	exe := exeName(goos)
	if m.Version != version || !slices.Equal(m.Compatibility.Platforms, []string{bundlePlatform[goos]}) ||
		m.Server.EntryPoint != "server/"+exe || m.Server.MCPConfig.Command != "${__dirname}/server/"+exe {
		t.Errorf("%s: version %q, platforms %v, entry point %q, command %q; want version %q", name, m.Version,
			m.Compatibility.Platforms, m.Server.EntryPoint, m.Server.MCPConfig.Command, version)
	}
	if !slices.Equal(m.Tools, committed.Tools) || !slices.Equal(m.Server.MCPConfig.Args, committed.Server.MCPConfig.Args) ||
		m.UserConfig != nil || m.Server.MCPConfig.Env != nil {
		t.Errorf("%s's manifest is not the repository's: rebuild the bundle", name)
	}
	if !bytes.Equal(files["icon.png"].data, mustRead(t, iconPath)) {
		t.Errorf("%s lacks the icon", name)
	}
	bin := files["server/"+exe]
	if len(bin.data) == 0 {
		t.Errorf("%s holds no server/%s", name, exe)
	}
	if goos != "windows" && bin.mode&0o111 == 0 {
		t.Errorf("%s's binary is not executable (%v): Claude Desktop could not start it", name, bin.mode)
	}
	return bin.data
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// runBundleOverStdio unpacks the files of a bundle (this system's) as Claude Desktop does and runs its manifest's
// command over stdio: tools/list answers with the manifest's tools, and a call without a key in the OS keyring
// answers with the connect page. The owner (unique to the test) and the E2B endpoints (the emulator) are added to
// the manifest's arguments, so that no key of the machine's user and no real E2B is ever reached.
func runBundleOverStdio(t *testing.T, files map[string]archived) {
	t.Helper()
	x := newH(t)
	requireKeyring(t)
	dir := x.path("bundle")
	for path, f := range files {
		dst := filepath.Join(dir, filepath.FromSlash(path))
		if !strings.HasPrefix(dst, dir+string(filepath.Separator)) {
			t.Fatalf("the bundle holds %q, outside its folder", path)
		}
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(dst, f.data, f.mode.Perm()); err != nil {
			t.Fatal(err)
		}
	}
	m := parseManifest(t, mustRead(t, filepath.Join(dir, "manifest.json")))
	command := strings.ReplaceAll(m.Server.MCPConfig.Command, "${__dirname}", dir)
	args := append(slices.Clone(m.Server.MCPConfig.Args), "--owner", x.owner("bundle"),
		"--api-url", the.emu.URL(), "--sandbox-url", the.emu.URL())

	s := x.startStdio(clientOpts{bin: command}, args...)
	list, err := s.ListTools(t.Context(), mcp.ListToolsRequest{})
	if err != nil {
		t.Fatalf("tools/list: %v\nstderr:\n%s", err, s.stderr)
	}
	var served []manifestTool
	for _, tool := range list.Tools {
		served = append(served, manifestTool{Name: tool.Name, Description: tool.Description})
	}
	// mcp-go lists tools by name; the manifest keeps the catalogue's order.
	byName := func(a, b manifestTool) int { return strings.Compare(a.Name, b.Name) }
	listed := slices.SortedFunc(slices.Values(m.Tools), byName)
	slices.SortFunc(served, byName)
	if len(served) != len(listed) {
		t.Errorf("the bundle's server lists %d tools, its manifest %d", len(served), len(listed))
	}
	for i := range min(len(served), len(listed)) {
		if served[i] != listed[i] {
			t.Errorf("the server lists %q: %q\nthe manifest %q: %q", served[i].Name, served[i].Description, listed[i].Name, listed[i].Description)
		}
	}
	msg := fails(t, s.Client, "e2b_list_sandboxes", map[string]any{})
	if connectLinkRE.FindString(msg) == "" || !strings.Contains(msg, "e2b-mcp auth login") {
		t.Errorf("a call without a key: %q; want the connect page's link and auth login", msg)
	}
}
