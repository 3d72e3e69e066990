package app

import (
	"errors"
	"io/fs"
	"os"

	"github.com/ralphloop/ralph/internal/errs"
	"github.com/ralphloop/ralph/internal/tasks"
)

// TaskSource picks the task file: --tasks, then --prd, then config,
// then what exists in the workspace. "beads" (or "beads:MOLECULE-ID") as
// --tasks or [tasks] source selects the beads database, which detection
// also picks when the repository has a .beads folder.
func (a *App) TaskSource(tasksFlag, prdFlag string) (tasks.Source, error) {
	ws, cfg := a.WS, a.cfg
	if mol, ok := tasks.ParseBeadsSource(tasksFlag); ok {
		return tasks.OpenBeads(ws.Root, mol, nil), nil
	}
	if tasksFlag != "" {
		p := ws.Abs(tasksFlag)
		kind := tasks.KindForPath(p)
		if kind == "" {
			return nil, errs.Usagef("--tasks %s is a folder without a beads database: name a PRD (.md), prd.json or progress.txt, or use --tasks beads", tasksFlag)
		}
		// A task file named on the command line must exist, except one
		// whose format answers a missing file with a setup template
		// (BMAD's progress.txt).
		_, templated := tasks.Open(kind, p).(tasks.SetupTemplater)
		if _, err := os.Stat(p); errors.Is(err, fs.ErrNotExist) && !templated {
			return nil, errs.Usagef("--tasks %s: no such file: name an existing PRD (.md), prd.json or progress.txt, or use --tasks beads for the beads database", tasksFlag)
		}
		return tasks.Open(kind, p), nil
	}
	if prdFlag != "" {
		p := ws.Abs(prdFlag)
		return tasks.Open(KindOrMarkdown(p), p), nil
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
			kind = KindOrMarkdown(p)
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

// KindOrMarkdown is tasks.KindForPath for a path meant to be a PRD: a
// folder there is read as a PRD too, whose load then says what is wrong.
func KindOrMarkdown(path string) tasks.Kind {
	if k := tasks.KindForPath(path); k != "" {
		return k
	}
	return tasks.KindMarkdown
}
