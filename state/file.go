package state

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"os"
	"runtime"
)

// bbolt's on-disk meta page, as laid out by go.etcd.io/bbolt/internal/common (native byte order): a 16-byte page
// header, then magic, version, page size, flags (4 bytes each), root bucket (16), freelist, high-water page id,
// transaction id and an FNV-64a checksum of everything before it (8 bytes each).
const (
	boltMagic          = 0xED0CDAED
	boltVersion        = 2
	boltPageHeaderSize = 16
	boltMetaSize       = 64
	boltChecksumOffset = 56 // within the meta
	boltMinPageSize    = 1024
	boltMaxPageSize    = 1 << 24
)

type boltMeta struct {
	valid    bool
	magicOK  bool
	version  uint32
	pageSize uint32
	pgid     uint64
	txid     uint64
}

func parseBoltMeta(page []byte) boltMeta {
	if len(page) < boltPageHeaderSize+boltMetaSize {
		return boltMeta{}
	}
	m := page[boltPageHeaderSize : boltPageHeaderSize+boltMetaSize]
	ne := binary.NativeEndian
	meta := boltMeta{
		magicOK:  ne.Uint32(m[0:]) == boltMagic,
		version:  ne.Uint32(m[4:]),
		pageSize: ne.Uint32(m[8:]),
		pgid:     ne.Uint64(m[40:]),
		txid:     ne.Uint64(m[48:]),
	}
	h := fnv.New64a()
	h.Write(m[:boltChecksumOffset])
	meta.valid = meta.magicOK && meta.version == boltVersion && h.Sum64() == ne.Uint64(m[boltChecksumOffset:]) &&
		meta.pageSize >= boltMinPageSize && meta.pageSize <= boltMaxPageSize && meta.pageSize&(meta.pageSize-1) == 0
	return meta
}

// checkFileHeader decides, without bbolt, whether bbolt may safely open path. It reports fresh for an empty file
// (only ever made by createIfMissing, holding nothing to lose). bbolt itself would map a file shorter than its
// meta page claims and fault on the first read beyond the end, so that is checked here.
func checkFileHeader(path string) (fresh bool, err error) {
	f, err := os.Open(path)
	if err != nil {
		return false, fmt.Errorf("state store %s: %w", path, err)
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return false, fmt.Errorf("state store %s: %w", path, err)
	}
	if !info.Mode().IsRegular() {
		return false, fmt.Errorf("%w: %s is not a regular file", ErrUnusable, path)
	}
	size := info.Size()
	if size == 0 {
		return true, nil
	}

	// Meta page 0 is at offset 0; meta page 1 is one page further, and bbolt probes 1KiB..16MiB for it when page
	// 0 is unreadable.
	var metas []boltMeta
	read := func(off int64) boltMeta {
		buf := make([]byte, boltPageHeaderSize+boltMetaSize)
		if n, err := f.ReadAt(buf, off); err != nil && !(errors.Is(err, io.EOF) && n == len(buf)) {
			return boltMeta{}
		}
		return parseBoltMeta(buf)
	}
	m0 := read(0)
	metas = append(metas, m0)
	if m0.valid {
		metas = append(metas, read(int64(m0.pageSize)))
	} else {
		for ps := int64(boltMinPageSize); ps <= boltMaxPageSize && ps < size; ps <<= 1 {
			if m := read(ps); m.valid && int64(m.pageSize) == ps {
				metas = append(metas, m)
				break
			}
		}
	}

	var best *boltMeta
	anyMagic, badVersion := false, uint32(0)
	for i := range metas {
		m := &metas[i]
		anyMagic = anyMagic || m.magicOK
		if m.magicOK && m.version != boltVersion {
			badVersion = m.version
		}
		if m.valid && (best == nil || m.txid > best.txid) {
			best = m
		}
	}
	switch {
	case best != nil:
	case !anyMagic:
		return false, fmt.Errorf("%w: %s is not an e2b-mcp state store (no bbolt header in its %d bytes); "+
			"it was left untouched: move it away to start a new store", ErrUnusable, path, size)
	case badVersion != 0:
		return false, fmt.Errorf("%w: %s uses bbolt file format version %d, this build reads version %d; "+
			"it was left untouched", ErrUnusable, path, badVersion, boltVersion)
	default:
		return false, fmt.Errorf("%w: %s is corrupt (both bbolt meta pages fail their checksum); "+
			"it was left untouched", ErrUnusable, path)
	}
	if need := best.pgid * uint64(best.pageSize); uint64(size) < need {
		return false, fmt.Errorf("%w: %s is truncated (%d bytes, its header needs at least %d); "+
			"it was left untouched", ErrUnusable, path, size, need)
	}
	return false, nil
}

// syncDir makes a new directory entry durable. Windows cannot fsync a directory and commits entries itself.
func syncDir(dir string) error {
	if runtime.GOOS == "windows" {
		return nil
	}
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("state store: syncing directory %s: %w", dir, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("state store: syncing directory %s: %w", dir, err)
	}
	return nil
}
