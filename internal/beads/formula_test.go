package beads_test

import (
	"strings"
	"testing"

	"github.com/ralphloop/ralph/internal/beads"
)

func TestFormulaRendersTOMLBdReads(t *testing.T) {
	f := beads.Formula{Formula: "ralph-prd", Version: 1, Type: "workflow", Steps: []beads.FormulaStep{
		{ID: beads.StepID("US-001"), Title: "US-001: One", Description: "### [ ] US-001: One\n- [ ] \"quoted\""},
		{ID: beads.StepID("US_002"), Title: "US-002: Two", Needs: []string{"us-001"}},
	}}
	out, err := f.Render()
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`formula = "ralph-prd"`, `id = "us-001"`, `id = "us-002"`, `needs = ["us-001"]`, `\"quoted\"`} {
		if !strings.Contains(string(out), want) {
			t.Errorf("rendered formula lacks %s:\n%s", want, out)
		}
	}
}

func TestFormulaRefusesWhatBdWouldRefuseLate(t *testing.T) {
	step := func(id string, needs ...string) beads.FormulaStep {
		return beads.FormulaStep{ID: id, Title: id, Needs: needs}
	}
	for name, tc := range map[string]struct {
		f    beads.Formula
		want string
	}{
		"bad name":      {beads.Formula{Formula: "Bad Name", Steps: []beads.FormulaStep{step("a")}}, "use lower-case letters"},
		"no steps":      {beads.Formula{Formula: "x"}, "has no steps"},
		"repeated step": {beads.Formula{Formula: "x", Steps: []beads.FormulaStep{step("a"), step("a")}}, `step id "a" is empty or repeated`},
		"forward needs": {beads.Formula{Formula: "x", Steps: []beads.FormulaStep{step("a", "b"), step("b")}}, `needs "b", which is not an earlier step`},
		"unknown needs": {beads.Formula{Formula: "x", Steps: []beads.FormulaStep{step("a", "zz")}}, `needs "zz"`},
	} {
		if _, err := tc.f.Render(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want %q", name, err, tc.want)
		}
	}
}
