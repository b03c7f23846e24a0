package e2b

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// FileType is envd's FileType enum name.
type FileType string

// The file types envd reports.
const (
	FileTypeFile      FileType = "FILE_TYPE_FILE"
	FileTypeDirectory FileType = "FILE_TYPE_DIRECTORY"
	FileTypeSymlink   FileType = "FILE_TYPE_SYMLINK"
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

// pbEntryInfo is filesystem.EntryInfo in proto3 JSON, with the proto names accepted as well.
type pbEntryInfo struct {
	Name               string            `json:"name"`
	Type               pbFileType        `json:"type"`
	Path               string            `json:"path"`
	Size               pbInt64           `json:"size"`
	Mode               pbInt64           `json:"mode"`
	Permissions        string            `json:"permissions"`
	Owner              string            `json:"owner"`
	Group              string            `json:"group"`
	ModifiedTime       string            `json:"modifiedTime"`
	ModifiedTimeProto  string            `json:"modified_time"`
	SymlinkTarget      *string           `json:"symlinkTarget"`
	SymlinkTargetProto *string           `json:"symlink_target"`
	Metadata           map[string]string `json:"metadata"`
}

func (p *pbEntryInfo) entry() (EntryInfo, error) {
	e := EntryInfo{
		Name: p.Name, Type: FileType(p.Type), Path: p.Path, Size: int64(p.Size), Mode: uint32(p.Mode),
		Permissions: p.Permissions, Owner: p.Owner, Group: p.Group, Metadata: p.Metadata,
	}
	mt := p.ModifiedTime
	if mt == "" {
		mt = p.ModifiedTimeProto
	}
	if mt != "" {
		t, err := time.Parse(time.RFC3339Nano, mt)
		if err != nil {
			return EntryInfo{}, fmt.Errorf("entry %q: invalid modifiedTime: %w", p.Path, err)
		}
		e.ModifiedTime = t
	}
	switch {
	case p.SymlinkTarget != nil:
		e.SymlinkTarget = *p.SymlinkTarget
	case p.SymlinkTargetProto != nil:
		e.SymlinkTarget = *p.SymlinkTargetProto
	}
	return e, nil
}

// pbFileType is the FileType enum, by name or (as proto3 JSON parsers also accept) by number. Unspecified and
// unknown types read as "".
type pbFileType FileType

func (t *pbFileType) UnmarshalJSON(b []byte) error {
	var name string
	if err := json.Unmarshal(b, &name); err != nil {
		var n int
		if err := json.Unmarshal(b, &n); err != nil {
			return fmt.Errorf("invalid file type %s", b)
		}
		name = map[int]string{1: string(FileTypeFile), 2: string(FileTypeDirectory), 3: string(FileTypeSymlink)}[n]
	}
	switch FileType(name) {
	case FileTypeFile, FileTypeDirectory, FileTypeSymlink:
		*t = pbFileType(name)
	default:
		*t = ""
	}
	return nil
}

type pbEntryAnswer struct {
	Entry *pbEntryInfo `json:"entry"`
}

func (a *pbEntryAnswer) entry(op string) (EntryInfo, error) {
	if a.Entry == nil {
		return EntryInfo{}, errorf(op, ErrBadAnswer, "unexpected answer from envd: no entry")
	}
	e, err := a.Entry.entry()
	if err != nil {
		return EntryInfo{}, errorf(op, ErrBadAnswer, "unexpected answer from envd: %w", err)
	}
	return e, nil
}

type pbPathRequest struct {
	Path string `json:"path"`
}

// Stat describes a path; a missing path matches ErrNotFound.
func (e *Envd) Stat(ctx context.Context, path string) (EntryInfo, error) {
	const op = "envd Stat"
	var out pbEntryAnswer
	if err := e.unary(ctx, op, "filesystem.Filesystem/Stat", pbPathRequest{Path: path}, &out, true); err != nil {
		return EntryInfo{}, err
	}
	return out.entry(op)
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
	req := struct {
		Path  string `json:"path"`
		Depth int    `json:"depth"`
	}{path, depth}
	var out struct {
		Entries []pbEntryInfo `json:"entries"`
	}
	if err := e.unary(ctx, op, "filesystem.Filesystem/ListDir", req, &out, true); err != nil {
		return nil, err
	}
	entries := make([]EntryInfo, 0, len(out.Entries))
	for i := range out.Entries {
		entry, err := out.Entries[i].entry()
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
	err = e.unary(ctx, "envd MakeDir", "filesystem.Filesystem/MakeDir", pbPathRequest{Path: path}, nil, false)
	var apiErr *APIError
	if errors.As(err, &apiErr) && apiErr.Code == "already_exists" {
		return false, nil
	}
	return err == nil, err
}

// Move renames source to destination.
func (e *Envd) Move(ctx context.Context, source, destination string) (EntryInfo, error) {
	const op = "envd Move"
	req := struct {
		Source      string `json:"source"`
		Destination string `json:"destination"`
	}{source, destination}
	var out pbEntryAnswer
	if err := e.unary(ctx, op, "filesystem.Filesystem/Move", req, &out, false); err != nil {
		return EntryInfo{}, err
	}
	return out.entry(op)
}

// Remove deletes a file or a directory tree.
func (e *Envd) Remove(ctx context.Context, path string) error {
	return e.unary(ctx, "envd Remove", "filesystem.Filesystem/Remove", pbPathRequest{Path: path}, nil, false)
}
