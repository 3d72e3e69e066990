package beads

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/BurntSushi/toml"
)

// FormulasDir is where bd looks for a repository's formulas.
func FormulasDir(root string) string { return filepath.Join(root, DirName, "formulas") }

// FormulaPath is the file of formula name under root.
func FormulaPath(root, name string) string {
	return filepath.Join(FormulasDir(root), name+".formula.toml")
}

// Formula is a proto in current bd: a workflow template whose steps become
// the issues of a molecule when poured (bd mol pour NAME). It replaces the
// seed's "template epic", which bd no longer pours.
type Formula struct {
	Formula     string        `toml:"formula"`
	Version     int           `toml:"version"`
	Type        string        `toml:"type"`
	Description string        `toml:"description,omitempty"`
	Steps       []FormulaStep `toml:"steps"`
}

// FormulaStep is one step; Needs names the steps it waits for.
type FormulaStep struct {
	ID          string   `toml:"id"`
	Title       string   `toml:"title"`
	Description string   `toml:"description,omitempty"`
	Needs       []string `toml:"needs,omitempty"`
}

var formulaName = regexp.MustCompile(`^[a-z0-9][a-z0-9-]*$`)

// StepID turns a task id such as "US-001" into a step id bd accepts
// ("us-001").
func StepID(id string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(id) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
			b.WriteRune(r)
		default:
			b.WriteByte('-')
		}
	}
	return strings.Trim(b.String(), "-")
}

// Validate checks what bd would otherwise refuse late: a name, steps with
// unique ids, and needs that name earlier steps.
func (f Formula) Validate() error {
	if !formulaName.MatchString(f.Formula) {
		return fmt.Errorf("formula name %q: use lower-case letters, digits and dashes", f.Formula)
	}
	if len(f.Steps) == 0 {
		return fmt.Errorf("formula %s has no steps", f.Formula)
	}
	seen := map[string]bool{}
	for _, s := range f.Steps {
		if s.ID == "" || seen[s.ID] {
			return fmt.Errorf("formula %s: step id %q is empty or repeated", f.Formula, s.ID)
		}
		for _, n := range s.Needs {
			if !seen[n] {
				return fmt.Errorf("formula %s: step %s needs %q, which is not an earlier step", f.Formula, s.ID, n)
			}
		}
		seen[s.ID] = true
	}
	return nil
}

// Render writes the formula as TOML.
func (f Formula) Render() ([]byte, error) {
	if err := f.Validate(); err != nil {
		return nil, err
	}
	var b bytes.Buffer
	b.WriteString("# Written by `ralph plan` from the PRD: the proto `ralph build` pours.\n")
	if err := toml.NewEncoder(&b).Encode(f); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// FormulaInfo is one entry of `bd formula list`.
type FormulaInfo struct {
	Name   string `json:"name"`
	Type   string `json:"type"`
	Source string `json:"source"`
	Steps  int    `json:"steps"`
}

// Formulas lists the formulas bd can pour.
func (c *Client) Formulas(ctx context.Context) ([]FormulaInfo, error) {
	p, err := c.runJSON(ctx, "formula", "list")
	if err != nil {
		return nil, err
	}
	return decodeList[FormulaInfo](p, "formulas")
}
