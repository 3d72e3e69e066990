package gitx

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// FileAt is one file of a commit's tree.
type FileAt struct {
	Path    string
	Content []byte
	// Mode is 0o755 for an executable, 0o644 otherwise.
	Mode fs.FileMode
}

// FilesAt returns the files among paths (slash-separated, relative to the
// repository) that the commit rev holds, with their content; a path the
// commit does not have is left out. Two git processes whatever the
// number of paths: ls-tree for which exist and their modes, cat-file
// --batch for their content. Symlinks and submodules are left out: ralph
// puts back regular files only.
func (r *Repo) FilesAt(ctx context.Context, rev string, paths []string) ([]FileAt, error) {
	if len(paths) == 0 {
		return nil, nil
	}
	if err := checkRevs(rev, rev); err != nil {
		return nil, err
	}
	args := append([]string{"--literal-pathspecs", "ls-tree", "-z", rev, "--"}, paths...)
	out, err := r.git(ctx, args...)
	if err != nil {
		return nil, err
	}
	var files []FileAt
	var batch strings.Builder
	for entry := range strings.SplitSeq(strings.TrimSuffix(string(out), "\x00"), "\x00") {
		// <mode> SP <type> SP <object> TAB <path>
		meta, path, ok := strings.Cut(entry, "\t")
		fields := strings.Fields(meta)
		if !ok || len(fields) != 3 || fields[1] != "blob" {
			continue
		}
		mode := fs.FileMode(0o644)
		switch fields[0] {
		case "100755":
			mode = 0o755
		case "100644":
		default:
			continue // a symlink (120000)
		}
		files = append(files, FileAt{Path: path, Mode: mode})
		batch.WriteString(fields[2] + "\n")
	}
	if len(files) == 0 {
		return nil, nil
	}
	sr, ok := r.Runner.(StdinRunner)
	if !ok {
		return nil, errors.New("gitx: FilesAt needs a Runner that can feed git's standard input")
	}
	blobs, err := sr.GitStdin(ctx, r.Dir, strings.NewReader(batch.String()), "cat-file", "--batch")
	if err != nil {
		return nil, err
	}
	for i := range files {
		// <object> SP blob SP <size> LF <content> LF
		nl := bytes.IndexByte(blobs, '\n')
		if nl < 0 {
			return nil, fmt.Errorf("gitx: cat-file --batch ended early, at %s", files[i].Path)
		}
		head := strings.Fields(string(blobs[:nl]))
		if len(head) != 3 || head[1] != "blob" {
			return nil, fmt.Errorf("gitx: cat-file --batch said %q for %s", blobs[:nl], files[i].Path)
		}
		size, err := strconv.Atoi(head[2])
		if err != nil || size < 0 || nl+1+size > len(blobs) {
			return nil, fmt.Errorf("gitx: cat-file --batch gave a bad size for %s", files[i].Path)
		}
		files[i].Content = blobs[nl+1 : nl+1+size]
		blobs = blobs[min(nl+1+size+1, len(blobs)):]
	}
	return files, nil
}

// MoveBranchBack moves the checked-out branch (or detached HEAD) to base
// and makes the tracked files match it, like git reset --hard, except
// for the paths under keep (files or folders), which keep what the work
// tree holds now: ralph's own records and the task file, which say why
// the branch went back. Untracked files stay. The caller keeps the
// commits it moves away from first (SetAside, an attempt's ref).
func (r *Repo) MoveBranchBack(ctx context.Context, base string, keep ...string) error {
	if err := checkRevs(base, base); err != nil {
		return err
	}
	type kept struct {
		data []byte
		mode fs.FileMode
		ok   bool
	}
	saved := map[string]kept{}
	if len(keep) > 0 {
		args := append([]string{"--literal-pathspecs", "ls-files", "-z", "--"}, keep...)
		tracked, err := r.git(ctx, args...)
		if err != nil {
			return err
		}
		args = append([]string{"--literal-pathspecs", "ls-tree", "-r", "-z", "--name-only", base, "--"}, keep...)
		atBase, err := r.git(ctx, args...)
		if err != nil {
			return err
		}
		for _, list := range [][]byte{tracked, atBase} {
			for p := range strings.SplitSeq(strings.TrimSuffix(string(list), "\x00"), "\x00") {
				if p == "" {
					continue
				}
				abs := filepath.Join(r.Dir, filepath.FromSlash(p))
				fi, err := os.Lstat(abs)
				if err != nil || !fi.Mode().IsRegular() {
					saved[p] = kept{}
					continue
				}
				data, err := os.ReadFile(abs)
				if err != nil {
					return err
				}
				saved[p] = kept{data: data, mode: fi.Mode().Perm(), ok: true}
			}
		}
	}
	if _, err := r.git(ctx, "reset", "--quiet", "--hard", base); err != nil {
		return err
	}
	for p, k := range saved {
		abs := filepath.Join(r.Dir, filepath.FromSlash(p))
		if !k.ok {
			if err := os.Remove(abs); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return err
			}
			continue
		}
		if err := os.MkdirAll(filepath.Dir(abs), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(abs, k.data, k.mode); err != nil {
			return err
		}
	}
	return nil
}
