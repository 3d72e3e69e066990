package cli

import (
	"errors"
	"fmt"
	"io/fs"
	"os"

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
		kind := tasks.KindForPath(p)
		if kind == "" {
			return nil, usageErrorf("--tasks %s is a folder without a beads database: name a PRD (.md), prd.json or progress.txt, or use --tasks beads", tasksFlag)
		}
		// A task file named on the command line must exist, except one
		// whose format answers a missing file with a setup template
		// (BMAD's progress.txt).
		_, templated := tasks.Open(kind, p).(tasks.SetupTemplater)
		if _, err := os.Stat(p); errors.Is(err, fs.ErrNotExist) && !templated {
			return nil, usageErrorf("--tasks %s: no such file: name an existing PRD (.md), prd.json or progress.txt, or use --tasks beads for the beads database", tasksFlag)
		}
		return tasks.Open(kind, p), nil
	}
	if prdFlag != "" {
		p := ws.Abs(prdFlag)
		return tasks.Open(kindOrMarkdown(p), p), nil
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
				p = tasks.ProgressFileName
			case tasks.KindJSON:
				p = tasks.PRDJSONFileName
			default:
				p = cfg.Build.PRD
			}
		}
		p = ws.Abs(p)
		if kind == "" {
			kind = kindOrMarkdown(p)
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

// namedPRDMissing is the usage error (exit 2) of a PRD named with --prd on
// the command line that is not there, like a --tasks that names nothing;
// a workspace without its default PRD is told how to write one (exit 1).
// Only the flag a person typed is held to it: a thread's loop names a PRD
// that its worktree makes.
func namedPRDMissing(src tasks.Source, prdFlag string) error {
	if _, templated := src.(tasks.SetupTemplater); templated {
		return nil
	}
	if _, err := os.Stat(src.Path()); errors.Is(err, fs.ErrNotExist) {
		return usageErrorf("--prd %s: no such file: name an existing PRD, or write one with `ralph prd \"what you want built\"`", prdFlag)
	}
	return nil
}

// kindOrMarkdown is tasks.KindForPath for a path meant to be a PRD: a
// folder there is read as a PRD too, whose load then says what is wrong.
func kindOrMarkdown(path string) tasks.Kind {
	if k := tasks.KindForPath(path); k != "" {
		return k
	}
	return tasks.KindMarkdown
}

// missingSource says that src does not exist yet and what makes one.
func missingSource(ws *workspace.Workspace, src tasks.Source) error {
	if c, ok := src.(tasks.Creatable); ok {
		return fmt.Errorf("no %s at %s: run `%s` to create one (ralph run works without one)", c.Noun(), ws.Rel(src.Path()), c.CreateCommand())
	}
	return fmt.Errorf("none yet at %s", ws.Rel(src.Path()))
}
