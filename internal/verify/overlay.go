package verify

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/ralphloop/ralph/internal/store"
)

// Overlay puts other versions of some files of a work tree in place for
// one run of the checks (the start's tests against the attempt's code, or
// the attempt's tests against the start's code) and puts the work back
// afterwards.
//
// It works in place, not in a copy of the tree, so that what the checks
// need and git ignores (node_modules, a virtualenv, build caches) is
// there. A kill at any instant is safe: the work's own versions are
// copied to Dir and a manifest is written before any file of the tree
// changes, and Restore (which the next start calls whatever it resumes
// in) puts every one of them back; it may run any number of times.
type Overlay struct {
	// Root is the work tree.
	Root string
	// Dir keeps the work's own versions while they are replaced: a folder
	// of ralph's records, outside what git sees.
	Dir string
}

// File is one file's version to put in place: its content, or Absent
// when the file must not exist for the run.
type File struct {
	Path    string // slash-separated, relative to Root
	Content []byte
	Absent  bool
	Mode    fs.FileMode
}

// saved is one manifest entry: the work's own version of Path.
type saved struct {
	Path   string      `json:"path"`
	Absent bool        `json:"absent,omitempty"`
	Mode   fs.FileMode `json:"mode,omitempty"`
	Copy   string      `json:"copy,omitempty"`
}

type manifest struct {
	SchemaVersion int     `json:"schema_version"`
	Files         []saved `json:"files"`
}

func (o Overlay) manifestPath() string { return filepath.Join(o.Dir, "manifest.json") }

// Pending reports whether an overlay is in place (a kill came before its
// Restore).
func (o Overlay) Pending() bool {
	_, err := os.Stat(o.manifestPath())
	return err == nil
}

// Apply saves the work's versions of files and puts the given versions in
// place. Paths must stay inside Root.
func (o Overlay) Apply(files []File) error {
	if o.Pending() {
		if err := o.Restore(); err != nil {
			return err
		}
	}
	if err := os.RemoveAll(o.Dir); err != nil {
		return err
	}
	if err := os.MkdirAll(o.Dir, 0o755); err != nil {
		return err
	}
	m := manifest{SchemaVersion: 1}
	for i, f := range files {
		abs, err := o.abs(f.Path)
		if err != nil {
			return err
		}
		s := saved{Path: f.Path}
		fi, err := os.Lstat(abs)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			s.Absent = true
		case err != nil:
			return err
		case !fi.Mode().IsRegular():
			return fmt.Errorf("%s is not a regular file: ralph does not put it aside", f.Path)
		default:
			data, err := os.ReadFile(abs)
			if err != nil {
				return err
			}
			s.Mode, s.Copy = fi.Mode().Perm(), fmt.Sprintf("%d", i)
			if err := store.WriteRecord(filepath.Join(o.Dir, s.Copy), data, 0o600); err != nil {
				return err
			}
		}
		m.Files = append(m.Files, s)
	}
	// The manifest is the commit point: from here on Restore puts the
	// work back, and before it nothing in the tree has changed.
	if err := store.WriteJSON(o.manifestPath(), m); err != nil {
		return err
	}
	for _, f := range files {
		abs, _ := o.abs(f.Path)
		if f.Absent {
			if err := os.Remove(abs); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return err
			}
			continue
		}
		if err := os.MkdirAll(filepath.Dir(abs), 0o755); err != nil {
			return err
		}
		mode := f.Mode
		if mode == 0 {
			mode = 0o644
		}
		if err := store.WriteRecord(abs, f.Content, mode); err != nil {
			return err
		}
	}
	return nil
}

// Restore puts the work's own versions back and forgets the overlay. With
// no overlay in place it does nothing.
func (o Overlay) Restore() error {
	var m manifest
	if _, err := store.ReadJSON(o.manifestPath(), 1, &m); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return fmt.Errorf("the files ralph put aside while it ran the checks with other versions are unreadable (%s): %w", o.Dir, err)
	}
	for _, s := range m.Files {
		abs, err := o.abs(s.Path)
		if err != nil {
			return err
		}
		if s.Absent {
			if err := os.Remove(abs); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return err
			}
			o.removeEmptyParents(abs)
			continue
		}
		data, err := os.ReadFile(filepath.Join(o.Dir, s.Copy))
		if err != nil {
			return fmt.Errorf("putting %s back: %w", s.Path, err)
		}
		if err := os.MkdirAll(filepath.Dir(abs), 0o755); err != nil {
			return err
		}
		if err := store.WriteRecord(abs, data, s.Mode); err != nil {
			return err
		}
	}
	if err := os.Remove(o.manifestPath()); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return os.RemoveAll(o.Dir)
}

// removeEmptyParents removes the folders an overlay made for a file that
// the work does not have, up to Root.
func (o Overlay) removeEmptyParents(abs string) {
	root := filepath.Clean(o.Root)
	for dir := filepath.Dir(abs); dir != root && strings.HasPrefix(dir, root+string(filepath.Separator)); dir = filepath.Dir(dir) {
		if os.Remove(dir) != nil {
			return
		}
	}
}

// abs resolves rel inside Root, refusing a path that leaves it.
func (o Overlay) abs(rel string) (string, error) {
	clean := filepath.Clean(filepath.FromSlash(rel))
	if clean == "." || filepath.IsAbs(clean) || clean == ".." || strings.HasPrefix(clean, ".."+string(filepath.Separator)) {
		return "", fmt.Errorf("%q is not a path inside the work tree", rel)
	}
	return filepath.Join(o.Root, clean), nil
}
