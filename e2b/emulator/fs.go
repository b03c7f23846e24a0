package emulator

import (
	"embed"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"
)

// skel holds Debian 12's /etc/skel files, which E2B's base template (a Debian image) has in /home/user.
//
//go:embed skel/bashrc skel/profile skel/bash_logout
var skel embed.FS

// skelTime is the modification time E2B's base template reports for the skel files.
var skelTime = time.Date(2025, 4, 18, 22, 47, 34, 0, time.UTC)

// seedSandboxDir lays out a fresh sandbox filesystem: dir/home (mounted as /home/user) with the template's dot
// files, and dir/tmp (mounted as /tmp).
func seedSandboxDir(dir string) error {
	home := filepath.Join(dir, "home")
	if err := os.MkdirAll(home, 0o755); err != nil {
		return err
	}
	tmp := filepath.Join(dir, "tmp")
	if err := os.MkdirAll(tmp, 0o777); err != nil {
		return err
	}
	// /tmp is world-writable and sticky in every Linux image; MkdirAll is subject to the umask.
	if err := os.Chmod(tmp, 0o777|fs.ModeSticky); err != nil {
		return err
	}
	for _, name := range []string{"bashrc", "profile", "bash_logout"} {
		data, err := skel.ReadFile("skel/" + name)
		if err != nil {
			return err
		}
		p := filepath.Join(home, "."+name)
		if err := os.WriteFile(p, data, 0o644); err != nil {
			return err
		}
		if err := os.Chmod(p, 0o644); err != nil {
			return err
		}
		if err := os.Chtimes(p, skelTime, skelTime); err != nil {
			return err
		}
	}
	return nil
}

// copyTree copies the directory src to dst, which must not exist: regular files with their contents, mode and
// modification time, directories with their mode, and symlinks as symlinks (never followed). Sockets, devices
// and pipes are skipped: they have no content to snapshot.
func copyTree(src, dst string) error {
	info, err := os.Lstat(src)
	if err != nil {
		return err
	}
	if !info.IsDir() {
		return fmt.Errorf("copy %s: not a directory", src)
	}
	if _, err := os.Lstat(dst); err == nil {
		return fmt.Errorf("copy to %s: already exists", dst)
	}
	return copyEntry(src, dst, info)
}

func copyEntry(src, dst string, info fs.FileInfo) error {
	switch mode := info.Mode(); {
	case mode&fs.ModeSymlink != 0:
		target, err := os.Readlink(src)
		if err != nil {
			return err
		}
		return os.Symlink(target, dst)
	case mode.IsDir():
		// Created writable so that its entries can be copied in; the real mode is applied afterwards.
		if err := os.Mkdir(dst, 0o700); err != nil {
			return err
		}
		entries, err := os.ReadDir(src)
		if err != nil {
			return err
		}
		for _, e := range entries {
			ei, err := e.Info()
			if err != nil {
				if errors.Is(err, fs.ErrNotExist) {
					continue // removed while we were copying
				}
				return err
			}
			if err := copyEntry(filepath.Join(src, e.Name()), filepath.Join(dst, e.Name()), ei); err != nil {
				return err
			}
		}
		if err := os.Chmod(dst, fileMode(mode)); err != nil {
			return err
		}
		return os.Chtimes(dst, info.ModTime(), info.ModTime())
	case mode.IsRegular():
		if err := copyFile(src, dst, mode); err != nil {
			return err
		}
		return os.Chtimes(dst, info.ModTime(), info.ModTime())
	default:
		return nil
	}
}

func copyFile(src, dst string, mode fs.FileMode) (err error) {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := out.Close(); err == nil {
			err = cerr
		}
	}()
	if _, err := io.Copy(out, in); err != nil {
		return fmt.Errorf("copy %s: %w", src, err)
	}
	return out.Chmod(fileMode(mode))
}

// fileMode keeps the permission bits and the setuid, setgid and sticky bits of m, in the form os.Chmod takes.
func fileMode(m fs.FileMode) fs.FileMode {
	return m & (fs.ModePerm | fs.ModeSetuid | fs.ModeSetgid | fs.ModeSticky)
}

// removeTree removes dir and everything in it, also entries inside directories whose owner took away write or
// search permission (commands in a sandbox can do that to their own files).
func removeTree(dir string) error {
	if dir == "" {
		return nil
	}
	err := os.RemoveAll(dir)
	if err == nil {
		return nil
	}
	// WalkDir calls the function for a directory before reading it, so fixing the mode there lets it descend.
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if d != nil && d.IsDir() {
			_ = os.Chmod(p, 0o700)
		}
		return nil
	})
	return os.RemoveAll(dir)
}
