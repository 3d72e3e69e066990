// Package verify is ralph's judgement of an attempt: whether the work an
// agent left is done, on evidence that ralph produced itself.
//
// The agent is treated as an adversary to verification. A check that
// fails is never reported as passed; a check that failed before any agent
// ran does not excuse an attempt that proves nothing; the tests and the
// files that define the checks are protected, so that changing them
// instead of the code shows; and an agent's word ("I'm done", its ticks)
// is labelled as such wherever it is all there is. The rules live here,
// in one place, so that every runner (build loop, thread, session) and
// both engines' merge queues judge the same way.
package verify

import (
	"fmt"
	"slices"
	"strings"

	"github.com/ralphloop/ralph/internal/testreport"
)

// CheckRun is one run of one check as the judgement sees it: the exit
// code's verdict and, where the runner reported them, the tests one by one.
type CheckRun struct {
	Name string `json:"name"`
	Run  string `json:"run"`
	// Passed is the check's own verdict: it ran to its end, exited 0, and
	// its report (when it has one) shows no failing test.
	Passed bool `json:"passed"`
	// Missing says the check's program is not installed: it proves
	// nothing either way.
	Missing bool `json:"missing,omitempty"`
	// Tests are the per-test results; nil when the runner gave none that
	// ralph could trust, and the check is judged by its exit code alone.
	Tests *testreport.Report `json:"tests,omitempty"`
	// Note says why a report was not used ("report file x.xml missing:
	// judged by its exit code"), "" when nothing needs saying.
	Note string `json:"note,omitempty"`
}

// Diff is what changed in one check between the tree an attempt started
// from and the tree it left. Test lists hold test names for people (the
// ID where two tests share a name), sorted.
type Diff struct {
	Check string `json:"check"`
	// PerTest says the lists come from per-test results on both trees;
	// otherwise the check is judged by its exit code alone and only the
	// check-level fields below say anything.
	PerTest bool `json:"per_test"`
	// PassedBefore and Passed are the check's verdicts on the two trees;
	// Known is false when the check did not run on the start tree (it was
	// added since).
	PassedBefore, Passed, Known bool
	// Fixed tests failed at the start (or could not build then) and pass
	// now: the evidence tests give.
	Fixed []string `json:"fixed,omitempty"`
	// Broken tests passed at the start and fail now, or cannot run now
	// (their package no longer builds).
	Broken []string `json:"broken,omitempty"`
	// StillFailing tests failed at the start and fail now.
	StillFailing []string `json:"still_failing,omitempty"`
	// New tests did not exist at the start and pass now.
	New []string `json:"new,omitempty"`
	// NewFailing tests did not exist at the start and fail now.
	NewFailing []string `json:"new_failing,omitempty"`
	// Gone tests existed at the start and are now missing or newly
	// skipped. They count as broken: deleting or skipping a test is how
	// an agent makes a check pass without the work.
	Gone []string `json:"gone,omitempty"`
	// BrokenGroups are packages or files that fail now without per-test
	// results (a build failure, a collection error) and did not at the
	// start.
	BrokenGroups []string `json:"broken_groups,omitempty"`
}

// Regressed reports whether the attempt broke something in this check: a
// test that passed (or existed) at the start, a new failing test, or,
// without per-test results, a check that passed at the start and fails now.
func (d Diff) Regressed() bool {
	if !d.PerTest {
		return !d.Passed && (d.PassedBefore || !d.Known)
	}
	return len(d.Broken)+len(d.Gone)+len(d.NewFailing)+len(d.BrokenGroups) > 0 ||
		(!d.Passed && d.PassedBefore)
}

// FixedCheck reports whether the check as a whole went from failing to
// passing. Without per-test results that is all the evidence it gives.
func (d Diff) FixedCheck() bool { return d.Known && !d.PassedBefore && d.Passed }

// Regressions names what the attempt broke, for people and the next
// prompt: "TestAdd passed at the start and fails now".
func (d Diff) Regressions() []string {
	var out []string
	add := func(names []string, what string) {
		for _, n := range names {
			out = append(out, n+" "+what)
		}
	}
	add(d.Broken, "passed at the start and fails now")
	add(d.Gone, "existed at the start and is now missing or skipped")
	add(d.NewFailing, "is new and fails")
	for _, g := range d.BrokenGroups {
		out = append(out, g)
	}
	if len(out) == 0 && d.Regressed() {
		if d.Known {
			out = append(out, fmt.Sprintf("check %q passed at the start and fails now", d.Check))
		} else {
			out = append(out, fmt.Sprintf("check %q fails", d.Check))
		}
	}
	return out
}

// Compare judges one check's run now against its run on the start tree
// (nil when the check did not run there).
func Compare(start *CheckRun, now CheckRun) Diff {
	d := Diff{Check: now.Name, Passed: now.Passed}
	if start != nil {
		d.Known, d.PassedBefore = true, start.Passed
	}
	if start == nil || start.Tests == nil || now.Tests == nil {
		return d
	}
	d.PerTest = true
	before, after := start.Tests, now.Tests
	names := displayNames(before, after)
	brokenAtStart := brokenGroups(before)
	brokenNow := brokenGroups(after)
	for _, t := range after.Tests {
		name := names[t.ID]
		old, existed := before.Find(t.ID)
		switch {
		case !existed && t.Status == testreport.Pass:
			if brokenAtStart[t.Group] {
				// Its package did not build at the start: the test was
				// there and could not pass. Tests written before the code
				// start like this in Go.
				d.Fixed = append(d.Fixed, name)
			} else {
				d.New = append(d.New, name)
			}
		case !existed && t.Status == testreport.Fail:
			if brokenAtStart[t.Group] {
				d.StillFailing = append(d.StillFailing, name)
			} else {
				d.NewFailing = append(d.NewFailing, name)
			}
		case !existed:
			// A new skipped test says nothing.
		case old.Status == testreport.Pass && t.Status == testreport.Fail:
			d.Broken = append(d.Broken, name)
		case old.Status != testreport.Skip && t.Status == testreport.Skip:
			d.Gone = append(d.Gone, name)
		case old.Status == testreport.Fail && t.Status == testreport.Fail,
			old.Status == testreport.Skip && t.Status == testreport.Fail:
			d.StillFailing = append(d.StillFailing, name)
		case old.Status != testreport.Pass && t.Status == testreport.Pass:
			d.Fixed = append(d.Fixed, name)
		}
	}
	for _, t := range before.Tests {
		if _, ok := after.Find(t.ID); ok || t.Status == testreport.Skip {
			continue
		}
		name := names[t.ID]
		switch {
		case brokenNow[t.Group] && t.Status == testreport.Pass:
			// Its package no longer builds: it cannot pass.
			d.Broken = append(d.Broken, name)
		case brokenNow[t.Group]:
			d.StillFailing = append(d.StillFailing, name)
		default:
			d.Gone = append(d.Gone, name)
		}
	}
	for _, g := range after.Broken {
		if !slices.Contains(before.Broken, g) && !brokenAtStart[groupOf(g)] {
			d.BrokenGroups = append(d.BrokenGroups, g)
		}
	}
	for _, l := range [][]string{d.Fixed, d.Broken, d.StillFailing, d.New, d.NewFailing, d.Gone, d.BrokenGroups} {
		slices.Sort(l)
	}
	return d
}

// brokenGroups lists the groups a report names as broken ("pkg: build
// failed" names pkg).
func brokenGroups(r *testreport.Report) map[string]bool {
	m := map[string]bool{}
	for _, b := range r.Broken {
		m[groupOf(b)] = true
	}
	return m
}

func groupOf(broken string) string {
	g, _, _ := strings.Cut(broken, ": ")
	return g
}

// displayNames names each test of the two reports as people know it: its
// short name, or its ID when two tests share the short name.
func displayNames(reports ...*testreport.Report) map[string]string {
	ids := map[string][]string{}
	for _, r := range reports {
		for _, t := range r.Tests {
			n := t.Name
			if n == "" {
				n = t.ID
			}
			if !slices.Contains(ids[n], t.ID) {
				ids[n] = append(ids[n], t.ID)
			}
		}
	}
	out := map[string]string{}
	for n, list := range ids {
		for _, id := range list {
			if len(list) == 1 {
				out[id] = n
			} else {
				out[id] = id
			}
		}
	}
	return out
}
