package envd

import (
	"encoding/json"
	"fmt"
)

// The messages of envd's filesystem.Filesystem service (filesystem/filesystem.proto) that the client and the
// emulator use.

// FileType is the filesystem.FileType enum, by name.
type FileType string

// The file types envd names; a socket or a device is FileTypeUnspecified, which is sent as nothing.
const (
	FileTypeUnspecified FileType = ""
	FileTypeFile        FileType = "FILE_TYPE_FILE"
	FileTypeDirectory   FileType = "FILE_TYPE_DIRECTORY"
	FileTypeSymlink     FileType = "FILE_TYPE_SYMLINK"
)

// fileTypeNumbers are the enum's numbers, which proto3 JSON parsers accept for its names.
var fileTypeNumbers = map[int]FileType{1: FileTypeFile, 2: FileTypeDirectory, 3: FileTypeSymlink}

// UnmarshalJSON reads a file type by name or by number. FILE_TYPE_UNSPECIFIED and a type this package does not
// know read as FileTypeUnspecified.
func (t *FileType) UnmarshalJSON(b []byte) error {
	var name string
	if err := json.Unmarshal(b, &name); err != nil {
		var n int
		if err := json.Unmarshal(b, &n); err != nil {
			return fmt.Errorf("invalid file type %s", b)
		}
		*t = fileTypeNumbers[n]
		return nil
	}
	switch FileType(name) {
	case FileTypeFile, FileTypeDirectory, FileTypeSymlink:
		*t = FileType(name)
	default:
		*t = FileTypeUnspecified
	}
	return nil
}

// EntryInfo is filesystem.EntryInfo: a file as envd describes it. For a symlink, Type and Mode describe its
// target.
type EntryInfo struct {
	Name string   `json:"name,omitempty"`
	Type FileType `json:"type,omitempty"`
	Path string   `json:"path,omitempty"`
	Size Int64    `json:"size,omitempty"`
	// Mode holds the permission bits only (420 is 0644).
	Mode Uint32 `json:"mode,omitempty"`
	// Permissions is Go's FileMode.String(): -rw-r--r--, drwxr-xr-x.
	Permissions string `json:"permissions,omitempty"`
	Owner       string `json:"owner,omitempty"`
	Group       string `json:"group,omitempty"`
	// ModifiedTime is a google.protobuf.Timestamp: RFC 3339 in UTC, with 0, 3, 6 or 9 fractional digits.
	ModifiedTime  string  `json:"modifiedTime,omitempty"`
	SymlinkTarget *string `json:"symlinkTarget,omitempty"`
	// Metadata are the file's user.e2b.* extended attributes, without the prefix.
	Metadata map[string]string `json:"metadata,omitempty"`
}

// UnmarshalJSON reads an entry with its members' JSON or proto names.
func (e *EntryInfo) UnmarshalJSON(b []byte) error {
	type plain EntryInfo
	var v struct {
		plain
		ProtoModifiedTime  string  `json:"modified_time"`
		ProtoSymlinkTarget *string `json:"symlink_target"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	*e = EntryInfo(v.plain)
	if e.ModifiedTime == "" {
		e.ModifiedTime = v.ProtoModifiedTime
	}
	if e.SymlinkTarget == nil {
		e.SymlinkTarget = v.ProtoSymlinkTarget
	}
	return nil
}

// PathRequest is a request that names only a path: StatRequest, MakeDirRequest and RemoveRequest.
type PathRequest struct {
	Path string `json:"path,omitempty"`
}

// EntryResponse is an answer that describes one file: StatResponse, MakeDirResponse and MoveResponse.
type EntryResponse struct {
	Entry *EntryInfo `json:"entry,omitempty"`
}

// ListDirRequest is the request of Filesystem/ListDir. A Depth of 0 is taken as 1.
type ListDirRequest struct {
	Path  string `json:"path,omitempty"`
	Depth Uint32 `json:"depth,omitempty"`
}

// ListDirResponse is the answer of Filesystem/ListDir.
type ListDirResponse struct {
	Entries []EntryInfo `json:"entries,omitempty"`
}

// MoveRequest is the request of Filesystem/Move.
type MoveRequest struct {
	Source      string `json:"source,omitempty"`
	Destination string `json:"destination,omitempty"`
}
