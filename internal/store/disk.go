//go:build linux || darwin || freebsd

package store

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"syscall"
)

// FreeBytes returns how many bytes an unprivileged process can still write
// on the filesystem that holds path (the blocks available to non-root users,
// not the ones reserved for root, because ralph and its agents run as the
// user). A path that does not exist yet is measured at its nearest existing
// parent, so a caller can check the room for a folder before making it.
func FreeBytes(path string) (uint64, error) {
	p, err := filepath.Abs(path)
	if err != nil {
		return 0, fmt.Errorf("free disk space of %s: %w", path, err)
	}
	for {
		var st syscall.Statfs_t
		err := syscall.Statfs(p, &st)
		if err == nil {
			return uint64(st.Bavail) * uint64(st.Bsize), nil
		}
		parent := filepath.Dir(p)
		if !errors.Is(err, fs.ErrNotExist) || parent == p {
			return 0, fmt.Errorf("free disk space of %s: %w", path, &fs.PathError{Op: "statfs", Path: p, Err: err})
		}
		p = parent
	}
}
