package e2b

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/e2b-mcp/e2b-mcp/e2b/wire/envd"
)

// FileType is envd's FileType enum name; "" for a type envd does not name (a socket, a device).
type FileType = envd.FileType

// The file types envd reports.
const (
	FileTypeFile      = envd.FileTypeFile
	FileTypeDirectory = envd.FileTypeDirectory
	FileTypeSymlink   = envd.FileTypeSymlink
)

// EntryInfo describes a file (filesystem.EntryInfo). For a symlink, Type and Mode describe the target.
type EntryInfo struct {
	Name          string
	Type          FileType
	Path          string
	Size          int64
	Mode          uint32 // permission bits only
	Permissions   string
	Owner, Group  string
	ModifiedTime  time.Time
	SymlinkTarget string
	Metadata      map[string]string
}

// entryOf is the EntryInfo envd described.
func entryOf(p *envd.EntryInfo) (EntryInfo, error) {
	e := EntryInfo{
		Name: p.Name, Type: p.Type, Path: p.Path, Size: int64(p.Size), Mode: uint32(p.Mode),
		Permissions: p.Permissions, Owner: p.Owner, Group: p.Group, SymlinkTarget: deref(p.SymlinkTarget),
		Metadata: p.Metadata,
	}
	if p.ModifiedTime != "" {
		t, err := time.Parse(time.RFC3339Nano, p.ModifiedTime)
		if err != nil {
			return EntryInfo{}, fmt.Errorf("entry %q: invalid modifiedTime: %w", p.Path, err)
		}
		e.ModifiedTime = t
	}
	return e, nil
}

// entryAnswer is the entry of a Stat, MakeDir or Move answer.
func entryAnswer(op string, a *envd.EntryResponse) (EntryInfo, error) {
	if a.Entry == nil {
		return EntryInfo{}, errorf(op, ErrBadAnswer, "unexpected answer from envd: no entry")
	}
	e, err := entryOf(a.Entry)
	if err != nil {
		return EntryInfo{}, errorf(op, ErrBadAnswer, "unexpected answer from envd: %w", err)
	}
	return e, nil
}

// Stat describes a path; a missing path matches ErrNotFound.
func (e *Envd) Stat(ctx context.Context, path string) (EntryInfo, error) {
	const op = "envd Stat"
	var out envd.EntryResponse
	if err := e.unary(ctx, op, "filesystem.Filesystem/Stat", envd.PathRequest{Path: path}, &out, true); err != nil {
		return EntryInfo{}, err
	}
	return entryAnswer(op, &out)
}

// ListDir lists a directory to depth (0 is treated as 1). Entries of a type envd does not name (sockets, devices)
// are left out, as E2B's SDKs do.
func (e *Envd) ListDir(ctx context.Context, path string, depth int) ([]EntryInfo, error) {
	const op = "envd ListDir"
	if depth < 0 || depth > 1<<31 {
		return nil, errorf(op, ErrInvalidArgument, "invalid depth %d", depth)
	}
	if depth == 0 {
		depth = 1
	}
	req := envd.ListDirRequest{Path: path, Depth: envd.Uint32(depth)}
	var out envd.ListDirResponse
	if err := e.unary(ctx, op, "filesystem.Filesystem/ListDir", req, &out, true); err != nil {
		return nil, err
	}
	entries := make([]EntryInfo, 0, len(out.Entries))
	for i := range out.Entries {
		entry, err := entryOf(&out.Entries[i])
		if err != nil {
			return nil, errorf(op, ErrBadAnswer, "unexpected answer from envd: %w", err)
		}
		switch entry.Type {
		case FileTypeFile, FileTypeDirectory, FileTypeSymlink:
			entries = append(entries, entry)
		}
	}
	return entries, nil
}

// MakeDir creates a directory and its parents; created is false when it already existed.
func (e *Envd) MakeDir(ctx context.Context, path string) (created bool, err error) {
	err = e.unary(ctx, "envd MakeDir", "filesystem.Filesystem/MakeDir", envd.PathRequest{Path: path}, nil, false)
	var apiErr *APIError
	if errors.As(err, &apiErr) && apiErr.Code == "already_exists" {
		return false, nil
	}
	return err == nil, err
}

// Move renames source to destination.
func (e *Envd) Move(ctx context.Context, source, destination string) (EntryInfo, error) {
	const op = "envd Move"
	req := envd.MoveRequest{Source: source, Destination: destination}
	var out envd.EntryResponse
	if err := e.unary(ctx, op, "filesystem.Filesystem/Move", req, &out, false); err != nil {
		return EntryInfo{}, err
	}
	return entryAnswer(op, &out)
}

// Remove deletes a file or a directory tree.
func (e *Envd) Remove(ctx context.Context, path string) error {
	return e.unary(ctx, "envd Remove", "filesystem.Filesystem/Remove", envd.PathRequest{Path: path}, nil, false)
}
