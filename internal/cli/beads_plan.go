package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/ralphloop/ralph/internal/app"
	"github.com/ralphloop/ralph/internal/beads"
	"github.com/ralphloop/ralph/internal/gitx"
	"github.com/ralphloop/ralph/internal/store"
	"github.com/ralphloop/ralph/internal/tasks"
	"github.com/ralphloop/ralph/internal/text"
	"github.com/ralphloop/ralph/internal/words"
	"github.com/ralphloop/ralph/internal/workspace"
)

// planBeadsProto is `ralph plan` for the beads task store (REQ-033): the
// PRD's open stories become the steps of a formula, the proto of current
// bd, in .beads/formulas/NAME.formula.toml. A story's dependencies
// (prd.json dependsOn) become the step's needs; a markdown PRD, which has
// none, keeps its order by making each step need the one before. ralph
// checks that bd lists the formula, commits it, and records it for the
// next `ralph build`, which pours it.
func planBeadsProto(ctx context.Context, ws *workspace.Workspace, prdPath, name string, out io.Writer, now time.Time) error {
	if info, err := os.Stat(filepath.Join(ws.Root, beads.DirName)); err != nil || !info.IsDir() {
		return fmt.Errorf("no beads database in %s: run bd init first (see docs/beads.md)", ws.Root)
	}
	prd := tasks.Open(app.KindOrMarkdown(prdPath), prdPath)
	board, err := prd.Load()
	if errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("no PRD at %s: the proto is made from the PRD's stories; write one with ralph prd \"what you want built\", or pass --prd PATH", ws.Rel(prdPath))
	}
	if err != nil {
		return err
	}
	if name == "" {
		name = "ralph-" + beads.StepID(strings.TrimSuffix(baseName(prdPath), ".json"))
	}
	f := beads.Formula{Formula: name, Version: 1, Type: "workflow",
		Description: "Stories of " + ws.Rel(prdPath) + ", planned by ralph"}
	included := map[string]string{}
	acceptance := map[string]string{}
	prev := ""
	for _, s := range board.Stories {
		if s.Done {
			continue
		}
		step := beads.FormulaStep{ID: beads.StepID(s.ID), Title: s.ID + ": " + s.Title, Description: strings.TrimSpace(s.Block)}
		switch {
		case len(s.DependsOn) > 0:
			for _, d := range s.DependsOn {
				if id, ok := included[d]; ok {
					step.Needs = append(step.Needs, id)
				}
			}
		case board.Kind == tasks.KindMarkdown && prev != "":
			step.Needs = []string{prev}
		}
		included[s.ID] = step.ID
		prev = step.ID
		if text := acceptanceText(s.Criteria); text != "" {
			acceptance[step.ID] = text
		}
		f.Steps = append(f.Steps, step)
	}
	if len(f.Steps) == 0 {
		return fmt.Errorf("%s has no open story to plan: every story is done", ws.Rel(prdPath))
	}
	data, err := f.Render()
	if err != nil {
		return err
	}
	path := beads.FormulaPath(ws.Root, name)
	if err := os.MkdirAll(beads.FormulasDir(ws.Root), 0o755); err != nil {
		return err
	}
	if err := store.WriteFileAtomic(path, data, 0o644); err != nil {
		return err
	}
	client := beads.New(ws.Root)
	list, err := client.Formulas(ctx)
	if err != nil {
		return fmt.Errorf("wrote %s, but bd could not list formulas: %w", ws.Rel(path), err)
	}
	found := false
	for _, fi := range list {
		found = found || fi.Name == name
	}
	if !found {
		return fmt.Errorf("wrote %s, but bd formula list does not show %s: check the file with bd formula show %s", ws.Rel(path), name, name)
	}
	bg := context.WithoutCancel(ctx)
	if err := ws.Repo.AddAll(bg); err != nil {
		return err
	}
	if _, err := ws.Repo.Commit(bg, fmt.Sprintf("ralph: proto %s (%s) from %s\n", name, words.Count(len(f.Steps), "step", "steps"), ws.Rel(prdPath))); err != nil && !errors.Is(err, gitx.ErrNothingToCommit) {
		return err
	}
	rec, err := app.LoadBeadsRecord(ws)
	if err != nil {
		return err
	}
	t := now.UTC()
	rec.Proto, rec.ProtoSteps, rec.PlannedAt, rec.Acceptance = name, len(f.Steps), &t, acceptance
	if err := app.SaveBeadsRecord(ws, rec, now); err != nil {
		return err
	}
	fmt.Fprintf(out, "✓ proto %s: %s from %s written to %s\n", name, words.Count(len(f.Steps), "step", "steps"), ws.Rel(prdPath), ws.Rel(path))
	for _, s := range f.Steps {
		needs := ""
		if len(s.Needs) > 0 {
			needs = " (needs " + strings.Join(s.Needs, ", ") + ")"
		}
		fmt.Fprintf(out, "  %s: %s%s\n", s.ID, s.Title, needs)
	}
	fmt.Fprintln(out, "next: ralph build pours it (bd mol pour) and works inside the molecule")
	return nil
}

// acceptanceText writes criteria as bd's acceptance field, one checkbox
// line each, verify commands kept in the PRD's own form.
func acceptanceText(cs []tasks.Criterion) string {
	var b strings.Builder
	for _, c := range cs {
		b.WriteString("- [ ] " + c.Text)
		if c.Verify != "" {
			b.WriteString(" (verify: `" + c.Verify + "`)")
		}
		b.WriteString("\n")
	}
	return strings.TrimSuffix(b.String(), "\n")
}

func baseName(p string) string {
	if i := strings.LastIndexByte(p, '/'); i >= 0 {
		p = p[i+1:]
	}
	if i := strings.LastIndexByte(p, '.'); i > 0 {
		p = p[:i]
	}
	return p
}

// beadsMolecule decides the molecule a beads build works in when none was
// named: the one a previous build poured while it is still open, else a
// fresh pour of the proto `ralph plan` wrote. It returns "" to work on the
// whole database. A molecule named with --tasks beads:MOL is remembered.
func beadsMolecule(ctx context.Context, ws *workspace.Workspace, src *tasks.BeadsSource, out io.Writer, now time.Time) (string, error) {
	rec, err := app.LoadBeadsRecord(ws)
	if err != nil {
		return "", err
	}
	client := src.Client()
	if mol := src.Molecule(); mol != "" {
		if rec.Molecule != mol {
			t := now.UTC()
			rec.Molecule, rec.PouredFrom, rec.PouredAt = mol, "", &t
			if err := app.SaveBeadsRecord(ws, rec, now); err != nil {
				return "", err
			}
		}
		return mol, nil
	}
	if rec.Molecule != "" {
		root, err := client.Show(ctx, rec.Molecule)
		if err == nil && root.Status != beads.StatusClosed {
			fmt.Fprintf(out, "beads: continuing molecule %s (poured from %s)\n", rec.Molecule, text.OrNone(rec.PouredFrom, "-"))
			return rec.Molecule, nil
		}
	}
	if !rec.ProtoPending() {
		return "", nil
	}
	res, err := client.MolPour(ctx, rec.Proto, nil)
	if err != nil {
		return "", fmt.Errorf("could not pour proto %s: %w", rec.Proto, err)
	}
	// The steps' acceptance criteria, which the formula could not carry.
	for key, id := range res.IDMapping {
		step, ok := strings.CutPrefix(key, rec.Proto+".")
		if text := rec.Acceptance[step]; ok && text != "" {
			if err := client.SetAcceptance(ctx, id, text); err != nil {
				fmt.Fprintf(out, "  ⚠ could not set the acceptance criteria of %s: %v\n", id, err)
			}
		}
	}
	t := now.UTC()
	rec.Molecule, rec.PouredFrom, rec.PouredAt = res.NewEpicID, rec.Proto, &t
	if err := app.SaveBeadsRecord(ws, rec, now); err != nil {
		return "", err
	}
	fmt.Fprintf(out, "beads: poured proto %s into molecule %s (%d issues); work stays inside it (bd ready --mol)\n", rec.Proto, res.NewEpicID, res.Created)
	return res.NewEpicID, nil
}
