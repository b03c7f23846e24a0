package tools

import (
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/e2b-mcp/e2b-mcp/e2b"
)

// maxUploadFiles bounds the files one e2b_create_sandbox call uploads (directories are walked).
const maxUploadFiles = 1000

// uploadFile is one entry of upload_files.
type uploadFile struct {
	SessionPath string `json:"session_path" jsonschema:"minLength=1" jsonschema_description:"File or directory on the server's host, relative to the first storage root or absolute inside one. Directories are uploaded with their contents."`
	SandboxPath string `json:"sandbox_path,omitempty" jsonschema_description:"Where to put it in the sandbox; relative paths are under /home/user. Default: /home/user/<name of session_path>."`
}

// plannedFile is one host file to upload. rel has no symlinks left in it and is opened through an os.Root, so
// that even a path changed after planning cannot lead outside its storage root.
type plannedFile struct {
	root        *os.Root
	rel         string // slash-separated, inside root
	sandboxPath string
	sessionPath string // the upload_files entry it comes from, as the call gave it
}

// uploadPlan is every file of upload_files, checked before the sandbox is created so that a refused path
// leaves nothing behind.
type uploadPlan struct {
	roots []*storageRoot
	files []plannedFile
}

func (p *uploadPlan) Close() {
	for _, r := range p.roots {
		r.root.Close()
	}
}

// storageRoot is an opened storage root: real is the directory with its own symlinks resolved.
type storageRoot struct {
	real string
	root *os.Root
}

// errEscapes says a path or symlink leads outside its storage root.
var errEscapes = errors.New("it leads outside the storage root")

// resolve follows the symlinks of rel (a path inside the root) and returns where it really is inside the root.
// Symlinks may be absolute or relative, as long as they end inside the root.
func (r *storageRoot) resolve(rel string) (string, error) {
	real, err := filepath.EvalSymlinks(filepath.Join(r.real, rel))
	if err != nil {
		return "", err
	}
	local, err := filepath.Rel(r.real, real)
	if err != nil || !filepath.IsLocal(local) {
		return "", errEscapes
	}
	return filepath.ToSlash(local), nil
}

// planUploads resolves upload_files inside the storage roots and lists the files to send.
func (b *base) planUploads(specs []uploadFile) (*uploadPlan, error) {
	plan := &uploadPlan{}
	if len(specs) == 0 {
		return plan, nil
	}
	if len(b.cfg.StorageRoots) == 0 {
		return nil, userErrorf("File uploads are not configured on this server: upload_files needs a storage root " +
			"(start e2b-mcp with --storage-root DIR). Nothing was created; call again without upload_files, " +
			"or write files with e2b_write_file.")
	}
	opened := map[string]*storageRoot{}
	openRoot := func(dir string) (*storageRoot, error) {
		if r, ok := opened[dir]; ok {
			return r, nil
		}
		real, err := filepath.EvalSymlinks(dir)
		if err != nil {
			return nil, err
		}
		root, err := os.OpenRoot(real)
		if err != nil {
			return nil, err
		}
		r := &storageRoot{real: real, root: root}
		opened[dir] = r
		plan.roots = append(plan.roots, r)
		return r, nil
	}
	for _, spec := range specs {
		dir, rel, ok := b.inRoot(spec.SessionPath)
		if !ok {
			plan.Close()
			return nil, userErrorf("Cannot upload '%s': it is outside the storage roots (%s). Nothing was created.",
				spec.SessionPath, strings.Join(b.cfg.StorageRoots, ", "))
		}
		root, err := openRoot(dir)
		if err != nil {
			plan.Close()
			return nil, userErrorf("Cannot upload '%s': the storage root %s cannot be opened: %v", spec.SessionPath, dir,
				unwrapPathError(err))
		}
		target := spec.SandboxPath
		if target == "" {
			target = path.Join(WorkspacePath, filepath.Base(filepath.Join(dir, rel)))
		}
		if err := plan.add(root, rel, target, spec.SessionPath); err != nil {
			plan.Close()
			return nil, err
		}
	}
	return plan, nil
}

// inRoot finds the storage root holding p and p's path inside it, lexically; symlinks are checked by resolve.
func (b *base) inRoot(p string) (dir, rel string, ok bool) {
	if !filepath.IsAbs(p) {
		rel = filepath.Clean(p)
		return b.cfg.StorageRoots[0], rel, filepath.IsLocal(rel)
	}
	p = filepath.Clean(p)
	for _, root := range b.cfg.StorageRoots {
		candidates := []string{filepath.Clean(root)}
		if real, err := filepath.EvalSymlinks(root); err == nil && real != candidates[0] {
			candidates = append(candidates, real)
		}
		for _, c := range candidates {
			if r, err := filepath.Rel(c, p); err == nil && filepath.IsLocal(r) {
				return root, r, true
			}
		}
	}
	return "", "", false
}

// add lists the file at rel (or every file under it, when it is a directory) for upload to target.
func (p *uploadPlan) add(sr *storageRoot, rel, target, shown string) error {
	refuse := func(err error) error {
		if errors.Is(err, fs.ErrNotExist) {
			return userErrorf("Cannot upload '%s': no such file in the storage root. Nothing was created.", shown)
		}
		return userErrorf("Cannot upload '%s': %v (paths and symlinks must stay inside the storage root). "+
			"Nothing was created.", shown, unwrapPathError(err))
	}
	local, err := sr.resolve(rel)
	if err != nil {
		return refuse(err)
	}
	info, err := sr.root.Stat(local)
	if err != nil {
		return refuse(err)
	}
	if !info.IsDir() {
		if !info.Mode().IsRegular() {
			return userErrorf("Cannot upload '%s': it is not a regular file. Nothing was created.", shown)
		}
		return p.push(sr.root, local, target, shown)
	}
	return fs.WalkDir(sr.root.FS(), local, func(name string, d fs.DirEntry, err error) error {
		if err != nil {
			return refuse(err)
		}
		if d.IsDir() {
			return nil
		}
		file := name
		if d.Type()&fs.ModeSymlink != 0 {
			if file, err = sr.resolve(name); err != nil {
				return refuse(err)
			}
		}
		fi, err := sr.root.Stat(file)
		if err != nil {
			return refuse(err)
		}
		// Directories reached through symlinks are not walked (they could loop), and devices or pipes are not files.
		if fi.IsDir() || !fi.Mode().IsRegular() {
			return nil
		}
		inside := name
		if local != "." {
			inside = strings.TrimPrefix(name, local+"/")
		}
		return p.push(sr.root, file, path.Join(target, inside), shown)
	})
}

func (p *uploadPlan) push(root *os.Root, rel, target, shown string) error {
	if len(p.files) >= maxUploadFiles {
		return userErrorf("Cannot upload '%s': upload_files may name at most %d files in all. Nothing was created.",
			shown, maxUploadFiles)
	}
	p.files = append(p.files, plannedFile{root: root, rel: rel, sandboxPath: target, sessionPath: shown})
	return nil
}

// uploadTargets plans upload_files (as a call gives them, decoded from JSON) exactly as the tool does, and returns
// every file they write. An error means the tool would refuse the uploads too.
func (b *base) uploadTargets(uploads []any) ([]plannedFile, error) {
	raw, err := json.Marshal(uploads)
	if err != nil {
		return nil, err
	}
	var specs []uploadFile
	if err := json.Unmarshal(raw, &specs); err != nil {
		return nil, err
	}
	plan, err := b.planUploads(specs)
	if err != nil {
		return nil, err
	}
	defer plan.Close()
	return plan.files, nil
}

// unwrapPathError drops the host path from an *fs.PathError: the model named the path already.
func unwrapPathError(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// upload streams every planned file into the sandbox and returns how many arrived; it stops at the first failure,
// so the count is also the index of the file that failed. A cancelled call (the client went away) stops it.
func (p *uploadPlan) upload(ctx context.Context, e *e2b.Envd) (int, error) {
	for i, f := range p.files {
		if err := ctx.Err(); err != nil {
			return i, err
		}
		if err := uploadOne(ctx, e, f); err != nil {
			return i, err
		}
	}
	return len(p.files), nil
}

// errNotRegular says a planned file is no longer a regular file when it is opened.
var errNotRegular error = &toolError{text: "it is no longer a regular file on the server (it changed " +
	"after it was checked)"}

// uploadOne sends one planned file. The file was a regular file when planned, but the storage root belongs to the
// host and may change since: it is opened without blocking (opening a FIFO for reading would otherwise wait for a
// writer forever, whatever the call's context says), and what was opened is checked again before a byte is read.
func uploadOne(ctx context.Context, e *e2b.Envd, f plannedFile) error {
	r, err := f.root.OpenFile(f.rel, os.O_RDONLY|nonBlocking, 0)
	if err != nil {
		return unwrapPathError(err)
	}
	defer r.Close()
	fi, err := r.Stat()
	if err != nil {
		return unwrapPathError(err)
	}
	if !fi.Mode().IsRegular() {
		return errNotRegular
	}
	_, err = e.Upload(ctx, f.sandboxPath, r)
	return err
}
