package emulator

import (
	"errors"
	"path"
	"syscall"

	"github.com/e2b-mcp/e2b-mcp/e2b/wire/envd"
)

// envd's filesystem.Filesystem RPCs (Stat, ListDir, MakeDir, Move, Remove) over the sandbox's filesystem.

func (e *envdService) fsStat(c *rpcCall) (any, *rpcError) {
	var req envd.PathRequest
	if err := decodeRequest(c.msg, &req, "*filesystem.StatRequest"); err != nil {
		return nil, err
	}
	p, rerr := c.expand(req.Path)
	if rerr != nil {
		return nil, rerr
	}
	entry, err := c.fs.entry(p)
	if err != nil {
		if isNotExist(err) {
			return nil, rpcErrorf("not_found", "file not found: %v", err)
		}
		return nil, rpcErrorf("internal", "error getting file info: %v", err)
	}
	return envd.EntryResponse{Entry: &entry}, nil
}

func (e *envdService) fsListDir(c *rpcCall) (any, *rpcError) {
	var req envd.ListDirRequest
	if err := decodeRequest(c.msg, &req, "*filesystem.ListDirRequest"); err != nil {
		return nil, err
	}
	depth := int(req.Depth)
	if depth == 0 {
		depth = 1
	}
	p, rerr := c.expand(req.Path)
	if rerr != nil {
		return nil, rerr
	}
	resolved, err := c.fs.resolve(p, true)
	if err != nil {
		switch {
		case isNotExist(err):
			return nil, rpcErrorf("not_found", "path not found: %v", err)
		case errors.Is(err, syscall.ELOOP):
			return nil, rpcErrorf("failed_precondition", "cyclic symlink or chain >255 links at %q", p)
		}
		return nil, rpcErrorf("internal", "error resolving symlink: %v", err)
	}
	fi, err := c.fs.lstat(resolved)
	if err != nil {
		if isNotExist(err) {
			return nil, rpcErrorf("not_found", "directory not found: %v", pathErr("stat", resolved, err))
		}
		return nil, rpcErrorf("internal", "error getting file info: %v", pathErr("stat", resolved, err))
	}
	if !fi.IsDir() {
		return nil, rpcErrorf("invalid_argument", "path is not a directory: %s", resolved)
	}
	entries := []envd.EntryInfo{}
	if err := c.fs.walk(p, resolved, depth, &entries); err != nil {
		return nil, rpcErrorf("internal", "error reading directory %s: %v", resolved, err)
	}
	return envd.ListDirResponse{Entries: entries}, nil
}

func (e *envdService) fsMakeDir(c *rpcCall) (any, *rpcError) {
	var req envd.PathRequest
	if err := decodeRequest(c.msg, &req, "*filesystem.MakeDirRequest"); err != nil {
		return nil, err
	}
	p, rerr := c.expand(req.Path)
	if rerr != nil {
		return nil, rerr
	}
	_, fi, err := c.fs.stat(p)
	switch {
	case err == nil && fi.IsDir():
		return nil, rpcErrorf("already_exists", "directory already exists: %s", p)
	case err == nil:
		return nil, rpcErrorf("invalid_argument", "path already exists but it is not a directory: %s", p)
	case !isNotExist(err):
		return nil, rpcErrorf("internal", "error getting file info: %v", pathErr("stat", p, err))
	}
	if err := c.fs.ensureDirs(p); err != nil {
		return nil, rpcErrorf("internal", "%v", err)
	}
	return envd.EntryResponse{Entry: &envd.EntryInfo{Name: path.Base(p), Type: envd.FileTypeDirectory, Path: p}}, nil
}

func (e *envdService) fsMove(c *rpcCall) (any, *rpcError) {
	var req envd.MoveRequest
	if err := decodeRequest(c.msg, &req, "*filesystem.MoveRequest"); err != nil {
		return nil, err
	}
	src, rerr := c.expand(req.Source)
	if rerr != nil {
		return nil, rerr
	}
	dst, rerr := c.expand(req.Destination)
	if rerr != nil {
		return nil, rerr
	}
	if err := c.fs.ensureDirs(path.Dir(dst)); err != nil {
		return nil, rpcErrorf("internal", "%v", err)
	}
	if err := c.fs.rename(src, dst); err != nil {
		if isNotExist(err) {
			return nil, rpcErrorf("not_found", "source file not found: rename %s %s: %v", src, dst, errnoOf(err))
		}
		return nil, rpcErrorf("internal", "error renaming: rename %s %s: %v", src, dst, errnoOf(err))
	}
	entry, err := c.fs.entry(dst)
	if err != nil {
		if isNotExist(err) {
			return nil, rpcErrorf("not_found", "file not found: %v", err)
		}
		return nil, rpcErrorf("internal", "error getting file info: %v", err)
	}
	return envd.EntryResponse{Entry: &entry}, nil
}

func (e *envdService) fsRemove(c *rpcCall) (any, *rpcError) {
	var req envd.PathRequest
	if err := decodeRequest(c.msg, &req, "*filesystem.RemoveRequest"); err != nil {
		return nil, err
	}
	p, rerr := c.expand(req.Path)
	if rerr != nil {
		return nil, rerr
	}
	if err := c.fs.removeAll(p); err != nil {
		return nil, rpcErrorf("internal", "error removing file or directory: %v", err)
	}
	return struct{}{}, nil
}
