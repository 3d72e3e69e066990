package cli

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/ralphloop/ralph/internal/config"
	"github.com/ralphloop/ralph/internal/tasks"
	"github.com/ralphloop/ralph/internal/workspace"
)

// resolveSource picks the task file: --tasks, then --prd, then config,
// then what exists in the workspace. "beads" (or "beads:MOLECULE-ID") as
// --tasks or [tasks] source selects the beads database, which detection
// also picks when the repository has a .beads folder.
func resolveSource(ws *workspace.Workspace, cfg config.Config, tasksFlag, prdFlag string) (tasks.Source, error) {
	if mol, ok := tasks.ParseBeadsSource(tasksFlag); ok {
		return tasks.OpenBeads(ws.Root, mol, nil), nil
	}
	if tasksFlag != "" {
		p := ws.Abs(tasksFlag)
		kind := kindOf(p, "")
		// A task file named on the command line must exist; only
		// progress.txt may be missing, which BMAD mode answers with its
		// setup template.
		if _, err := os.Stat(p); errors.Is(err, fs.ErrNotExist) && kind != tasks.KindProgress {
			return nil, usageErrorf("--tasks %s: no such file: name an existing PRD (.md), prd.json or progress.txt, or use --tasks beads for the beads database", tasksFlag)
		}
		return tasks.Open(kind, p), nil
	}
	if prdFlag != "" {
		p := ws.Abs(prdFlag)
		return tasks.Open(kindOf(p, tasks.KindMarkdown), p), nil
	}
	if mol, ok := tasks.ParseBeadsSource(cfg.Tasks.Source); ok {
		return tasks.OpenBeads(ws.Root, mol, nil), nil
	}
	if cfg.Tasks.Source != "" || cfg.Tasks.Path != "" {
		kind := tasks.Kind(cfg.Tasks.Source)
		p := cfg.Tasks.Path
		if p == "" {
			switch kind {
			case tasks.KindProgress:
				p = "progress.txt"
			case tasks.KindJSON:
				p = "prd.json"
			default:
				p = cfg.Build.PRD
			}
		}
		p = ws.Abs(p)
		if kind == "" {
			kind = kindOf(p, tasks.KindMarkdown)
		}
		return tasks.Open(kind, p), nil
	}
	src, err := tasks.Detect(ws.Root, "", ws.Abs(cfg.Build.PRD))
	if err != nil {
		// Nothing exists yet: the markdown PRD is the default, and the
		// loop's error for it names the command that writes one.
		return tasks.Open(tasks.KindMarkdown, ws.Abs(cfg.Build.PRD)), nil
	}
	return src, nil
}

// missingSource says that src does not exist yet and what makes one.
func missingSource(ws *workspace.Workspace, src tasks.Source) error {
	switch src.Kind() {
	case tasks.KindBeads:
		return fmt.Errorf("no beads database at %s: run `bd init` to create one", ws.Rel(src.Path()))
	case tasks.KindMarkdown:
		return fmt.Errorf("none yet at %s: ralph prd writes one (ralph run works without one)", ws.Rel(src.Path()))
	case tasks.KindProgress:
		return fmt.Errorf("none yet at %s: ralph init --bmad writes one", ws.Rel(src.Path()))
	}
	return fmt.Errorf("none yet at %s", ws.Rel(src.Path()))
}

func kindOf(path string, def tasks.Kind) tasks.Kind {
	switch strings.ToLower(filepath.Ext(path)) {
	case ".json":
		return tasks.KindJSON
	case ".txt", ".yaml", ".yml":
		return tasks.KindProgress
	case ".md", ".markdown":
		return tasks.KindMarkdown
	}
	if def == "" {
		return tasks.KindMarkdown
	}
	return def
}
