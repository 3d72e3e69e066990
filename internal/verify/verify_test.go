package verify

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ralphloop/ralph/internal/testreport"
)

// report builds a per-test report from "name=status" pairs; a "!group"
// entry marks a group broken (a package that did not build).
func report(entries ...string) *testreport.Report {
	r := &testreport.Report{Format: testreport.FormatGoJSON}
	for _, e := range entries {
		if g, ok := strings.CutPrefix(e, "!"); ok {
			r.Broken = append(r.Broken, g+": build failed")
			continue
		}
		name, st, _ := strings.Cut(e, "=")
		r.Tests = append(r.Tests, testreport.Test{ID: "ex " + name, Name: name, Group: "ex", Status: testreport.Status(st)})
	}
	return testreport.Merge(r)
}

func run(name string, passed bool, r *testreport.Report) CheckRun {
	return CheckRun{Name: name, Run: name, Passed: passed, Tests: r}
}

func TestCompareTellsEachTestsFate(t *testing.T) {
	start := run("go test", false, report("TestKeep=pass", "TestFix=fail", "TestBreak=pass", "TestStill=fail", "TestDeleted=pass", "TestSkipped=pass", "TestHidden=fail", "TestWasSkipped=skip"))
	now := run("go test", false, report("TestKeep=pass", "TestFix=pass", "TestBreak=fail", "TestStill=fail", "TestSkipped=skip", "TestHidden=skip", "TestNew=pass", "TestNewBad=fail", "TestWasSkipped=pass"))
	d := Compare(&start, now)
	want := Diff{Check: "go test", PerTest: true, Known: true,
		Fixed: []string{"TestFix", "TestWasSkipped"}, Broken: []string{"TestBreak"}, StillFailing: []string{"TestStill"},
		New: []string{"TestNew"}, NewFailing: []string{"TestNewBad"}, Gone: []string{"TestDeleted", "TestHidden", "TestSkipped"}}
	for _, c := range []struct {
		what      string
		got, want []string
	}{{"fixed", d.Fixed, want.Fixed}, {"broken", d.Broken, want.Broken}, {"still failing", d.StillFailing, want.StillFailing},
		{"new", d.New, want.New}, {"new failing", d.NewFailing, want.NewFailing}, {"gone", d.Gone, want.Gone}} {
		if !slices.Equal(c.got, c.want) {
			t.Errorf("%s = %v, want %v", c.what, c.got, c.want)
		}
	}
	if !d.Regressed() {
		t.Error("an attempt that broke, deleted and skipped tests did not regress")
	}
}

// Go tests written before the code do not build: the package is broken at
// the start and its tests appear only once the code exists. They are then
// fixed, not new; a package that stops building breaks every test that
// passed in it.
func TestComparePackagesThatDoNotBuild(t *testing.T) {
	start := run("go test", false, report("!ex"))
	d := Compare(&start, run("go test", true, report("TestAdd=pass")))
	if !slices.Equal(d.Fixed, []string{"TestAdd"}) || len(d.New) > 0 || d.Regressed() {
		t.Errorf("tests-first package: %+v; want TestAdd fixed", d)
	}
	d = Compare(&start, run("go test", false, report("!ex")))
	if d.Regressed() || len(d.Fixed) > 0 {
		t.Errorf("still not building: %+v; want nothing fixed and nothing broken", d)
	}
	good := run("go test", true, report("TestA=pass", "TestB=fail"))
	d = Compare(&good, run("go test", false, report("!ex")))
	if !slices.Equal(d.Broken, []string{"TestA"}) || !slices.Equal(d.StillFailing, []string{"TestB"}) || len(d.BrokenGroups) != 1 {
		t.Errorf("package broken by the attempt: %+v; want TestA broken, TestB still failing, the package named", d)
	}
}

func TestCompareWithoutPerTestResultsJudgesTheCheck(t *testing.T) {
	for _, c := range []struct {
		start            *CheckRun
		now              bool
		regressed, fixed bool
	}{
		{&CheckRun{Passed: true}, true, false, false},
		{&CheckRun{Passed: true}, false, true, false},
		{&CheckRun{Passed: false}, true, false, true},
		{&CheckRun{Passed: false}, false, false, false},
		{nil, false, true, false}, // a check added since: judged on its own
		{nil, true, false, false},
	} {
		d := Compare(c.start, CheckRun{Name: "make test", Passed: c.now, Tests: report("TestX=pass")})
		if d.PerTest || d.Regressed() != c.regressed || d.FixedCheck() != c.fixed {
			t.Errorf("start %+v, now passed=%v: per-test %v, regressed %v, fixed %v; want %v, %v", c.start, c.now, d.PerTest, d.Regressed(), d.FixedCheck(), c.regressed, c.fixed)
		}
	}
}

var addStory = Story{ID: "US-001", Title: "Add", Criteria: []string{"Add(2,3) is 5"}}

func TestJudgeSendsBackALazyAttemptNextToAFailingCheck(t *testing.T) {
	start := run("go test", false, report("!ex"))
	j := Judge(Input{Story: addStory, Diffs: []Diff{Compare(&start, run("go test", false, report("!ex")))}})
	if j.Outcome != Rejected || !strings.Contains(strings.Join(j.Problems, "\n"), "nothing ralph ran shows US-001 done") {
		t.Fatalf("lazy attempt: %+v; want it sent back saying what proof is missing", j)
	}
	if !slices.Equal(j.Failing, []string{"go test"}) || !slices.Equal(j.FailedAtStartToo, []string{"go test"}) {
		t.Errorf("failing %v, failed at start too %v; want go test in both", j.Failing, j.FailedAtStartToo)
	}
	// The same with a check judged by its exit code alone.
	j = Judge(Input{Story: addStory, Diffs: []Diff{Compare(&CheckRun{Name: "make test"}, CheckRun{Name: "make test"})}})
	if j.Outcome != Rejected {
		t.Errorf("lazy attempt, exit codes only: %+v; want rejected", j)
	}
}

func TestJudgeAcceptsAnHonestAttemptOnItsEvidence(t *testing.T) {
	start := run("go test", false, report("!ex"))
	j := Judge(Input{Story: addStory, Diffs: []Diff{Compare(&start, run("go test", true, report("TestAdd=pass", "TestAddMore=pass")))}})
	if j.Outcome != Verified || len(j.Evidence) != 2 || !strings.Contains(j.Evidence[0], "failed at the start and passes now") {
		t.Fatalf("honest attempt: %+v; want verified on the fixed tests", j)
	}
	// Exit codes only: the check that failed and now passes is the evidence.
	j = Judge(Input{Story: addStory, Diffs: []Diff{Compare(&CheckRun{Name: "make test"}, CheckRun{Name: "make test", Passed: true})}})
	if j.Outcome != Verified {
		t.Errorf("make test fixed: %+v; want verified", j)
	}
}

func TestJudgeRefusesChangedTestsThatDoNotHoldWithTheStartsVersion(t *testing.T) {
	start := run("go test", false, report("TestAdd=fail", "TestOther=pass"))
	// The agent put t.Skip in TestAdd: the check passes, TestAdd is gone.
	skipped := Compare(&start, run("go test", true, report("TestAdd=skip", "TestOther=pass")))
	j := Judge(Input{Story: addStory, Diffs: []Diff{skipped}, ProtectedChanged: []string{"add_test.go"}})
	if j.Outcome != Rejected {
		t.Errorf("skipped test: %+v; want rejected", j)
	}
	// The agent rewrote the assertion: the test passes with its version,
	// fails with the start's.
	weakened := Compare(&start, run("go test", true, report("TestAdd=pass", "TestOther=pass")))
	withStart := Compare(&start, run("go test", false, report("TestAdd=fail", "TestOther=pass")))
	j = Judge(Input{Story: addStory, Diffs: []Diff{weakened}, WithStartTests: []Diff{withStart}, ProtectedChanged: []string{"add_test.go"}})
	if j.Outcome != Rejected || len(j.Evidence) > 0 {
		t.Errorf("weakened test: %+v; want rejected with no evidence", j)
	}
	// A rewritten Makefile that breaks a passing test with the start's
	// version put back.
	broke := Compare(&start, run("go test", false, report("TestAdd=fail", "TestOther=fail")))
	j = Judge(Input{Story: addStory, Diffs: []Diff{weakened}, WithStartTests: []Diff{broke}, ProtectedChanged: []string{"Makefile"}})
	if j.Outcome != Rejected || !strings.Contains(strings.Join(j.Problems, "\n"), "start's version of Makefile") {
		t.Errorf("with the start's Makefile: %+v; want rejected naming the Makefile", j)
	}
	// The test file deleted, where Go tests written first did not build:
	// the check passes with nothing to run, and fails with the start's
	// file put back.
	notBuilding := run("go test", false, report("!ex"))
	deleted := Compare(&notBuilding, run("go test", true, report()))
	withStartFile := Compare(&notBuilding, run("go test", false, report("!ex")))
	j = Judge(Input{Story: addStory, Diffs: []Diff{deleted}, WithStartTests: []Diff{withStartFile}, ProtectedChanged: []string{"add_test.go"}})
	if j.Outcome != Rejected {
		t.Errorf("deleted test file: %+v; want rejected", j)
	}
	// An honest change to a test file: the fix holds with the start's test.
	j = Judge(Input{Story: addStory, Diffs: []Diff{weakened}, WithStartTests: []Diff{weakened}, ProtectedChanged: []string{"add_test.go"}})
	if j.Outcome != Verified {
		t.Errorf("fix that holds with the start's test: %+v; want verified", j)
	}
}

func TestJudgeSendsATestChangeTheStoryAsksForToReview(t *testing.T) {
	story := Story{ID: "US-004", Title: "Greet in French", Criteria: []string{"Greet returns bonjour; update the greeting test"}}
	start := run("go test", true, report("TestGreet=pass"))
	now := Compare(&start, run("go test", true, report("TestGreet=pass")))
	withStart := Compare(&start, run("go test", false, report("TestGreet=fail")))
	j := Judge(Input{Story: story, Diffs: []Diff{now}, WithStartTests: []Diff{withStart}, ProtectedChanged: []string{"greet_test.go"}})
	if j.Outcome != Review || !strings.Contains(strings.Join(j.Problems, "\n"), "ralph approve US-004") {
		t.Errorf("behaviour change: %+v; want review", j)
	}
	// Without those words the same attempt is a cheat.
	j = Judge(Input{Story: Story{ID: "US-004", Criteria: []string{"Greet returns bonjour"}}, Diffs: []Diff{now}, WithStartTests: []Diff{withStart}, ProtectedChanged: []string{"greet_test.go"}})
	if j.Outcome != Rejected {
		t.Errorf("same change, story silent on tests: %+v; want rejected", j)
	}
}

func TestJudgeAgentWordAndVerifyCommands(t *testing.T) {
	passing := run("go test", true, report("TestA=pass"))
	d := Compare(&passing, passing)
	// Nothing can prove a docs story: the agent's word, labelled.
	j := Judge(Input{Story: Story{ID: "US-9", Title: "Docs"}, Diffs: []Diff{d}})
	if j.Outcome != AgentWord || !j.Accepted() || j.Label() != "done, agent's word" {
		t.Errorf("docs story: %+v; want agent's word", j)
	}
	if j := Judge(Input{Story: Story{ID: "US-9"}, Diffs: []Diff{d}, RequireEvidence: true}); j.Outcome != Rejected || !strings.Contains(j.Problems[0], "every check passes") {
		t.Errorf("require_evidence: %+v; want rejected, every check passing", j)
	}
	// Without any check, the refusal never says that checks pass.
	if j := Judge(Input{Story: Story{ID: "US-9"}, RequireEvidence: true}); j.Outcome != Rejected || !strings.HasPrefix(j.Problems[0], "no checks are configured, but nothing ralph ran shows US-9 done") {
		t.Errorf("require_evidence without checks: %+v; want rejected, no checks configured", j)
	}
	// A verify command that already passed proves nothing.
	cmd := CommandRun{Criterion: "AC-1", Command: "test -f README.md", Passed: true, AtStart: RunPassed}
	j = Judge(Input{Story: Story{ID: "US-9"}, Diffs: []Diff{d}, Commands: []CommandRun{cmd}})
	if j.Outcome != AgentWord || !strings.Contains(strings.Join(j.Notes, "\n"), "proves nothing") {
		t.Errorf("verify command passing at the start: %+v; want agent's word and a note", j)
	}
	cmd.AtStart = RunFailed
	if j := Judge(Input{Story: Story{ID: "US-9"}, Diffs: []Diff{d}, Commands: []CommandRun{cmd}}); j.Outcome != Verified {
		t.Errorf("verify command fixed: %+v; want verified", j)
	}
	cmd.WithStartFiles = RunFailed
	if j := Judge(Input{Story: Story{ID: "US-9"}, Diffs: []Diff{d}, Commands: []CommandRun{cmd}, ProtectedChanged: []string{"verify.sh"}}); j.Outcome != Rejected {
		t.Errorf("verify command that passes only with the agent's changed script: %+v; want rejected", j)
	}
	cmd.Passed = false
	if j := Judge(Input{Story: Story{ID: "US-9"}, Diffs: []Diff{d}, Commands: []CommandRun{cmd}}); j.Outcome != Rejected {
		t.Errorf("failing verify command: %+v; want rejected", j)
	}
	yes, no := true, false
	if j := Judge(Input{Story: Story{ID: "US-9"}, Diffs: []Diff{d}, Reviewer: &yes}); j.Outcome != Verified {
		t.Errorf("reviewer qualified: %+v; want verified", j)
	}
	if j := Judge(Input{Story: Story{ID: "US-9"}, Diffs: []Diff{d}, Reviewer: &no}); j.Outcome != Rejected {
		t.Errorf("reviewer not qualified: %+v; want rejected", j)
	}
}

func TestJudgePartialWorkAndOtherStoriesTests(t *testing.T) {
	story := Story{ID: "US-001", Title: "Add and Sub", Criteria: []string{"Add(2,3) is 5", "Sub(5,3) is 2"}}
	start := run("go test", false, report("TestAdd=fail", "TestSub=fail", "TestMul=fail"))
	half := Compare(&start, run("go test", false, report("TestAdd=pass", "TestSub=fail", "TestMul=fail")))
	j := Judge(Input{Story: story, Diffs: []Diff{half}})
	if j.Outcome != Rejected || !strings.Contains(strings.Join(j.Problems, "\n"), "TestSub still fails") {
		t.Errorf("half the story: %+v; want rejected naming TestSub", j)
	}
	// TestMul is another story's: with both of this story's tests fixed it
	// is accepted, and the failing check is noted.
	all := Compare(&start, run("go test", false, report("TestAdd=pass", "TestSub=pass", "TestMul=fail")))
	j = Judge(Input{Story: story, Diffs: []Diff{all}})
	if j.Outcome != Verified || !slices.Equal(j.Failing, []string{"go test"}) {
		t.Errorf("whole story, another story's test failing: %+v; want verified, go test failing", j)
	}
	// New tests count, unless red/green says they pass on the old code.
	passing := run("go test", true, report("TestA=pass"))
	withNew := Compare(&passing, run("go test", true, report("TestA=pass", "TestNew=pass")))
	if j := Judge(Input{Story: Story{ID: "US-2"}, Diffs: []Diff{withNew}}); j.Outcome != Verified {
		t.Errorf("a new passing test: %+v; want verified", j)
	}
	if j := Judge(Input{Story: Story{ID: "US-2"}, Diffs: []Diff{withNew}, RedGreen: map[string]bool{"TestNew": false}}); j.Outcome != AgentWord {
		t.Errorf("a new test that passes on the old code too: %+v; want no evidence", j)
	}
	if j := Judge(Input{Story: Story{ID: "US-2"}, Diffs: []Diff{withNew}, RedGreen: map[string]bool{"TestNew": true}}); j.Outcome != Verified {
		t.Errorf("a new test that fails on the old code: %+v; want verified", j)
	}
}

func TestTestOfStory(t *testing.T) {
	for _, c := range []struct {
		story Story
		test  string
		want  bool
	}{
		{Story{Criteria: []string{"Sub(5,3) is 2"}}, "TestSub", true},
		{Story{Criteria: []string{"subtraction works"}}, "TestSub", true},
		{Story{Criteria: []string{"Add(2,3) is 5"}}, "TestAddUser", false},
		{Story{Criteria: []string{"Add(2,3) is 5"}}, "TestMul", false},
		{Story{Criteria: []string{"parse the config"}, Block: "see TestParseConfigFile"}, "example.com/m TestParseConfigFile", true},
		{Story{Criteria: []string{"Parse reads dates"}}, "tests/test_parse.py :: test_parse_dates", true},
		{Story{Title: "Add a multiply function", Criteria: []string{"Mul(2,3) is 6"}}, "TestAdd", false},
		{Story{Criteria: []string{"x"}}, "Test", false},
	} {
		if got := TestOfStory(c.story, c.test); got != c.want {
			t.Errorf("TestOfStory(%+v, %q) = %v, want %v", c.story, c.test, got, c.want)
		}
	}
}

func TestStoryChangesTests(t *testing.T) {
	for text, want := range map[string]bool{
		"Greeting is French; update the greeting test": true,
		"remove the legacy tests":                      true,
		"the old tests must be replaced":               true,
		"Add(2,3) is 5":                                false,
		"all tests pass":                               false,
		"tests cover the new flag":                     false,
	} {
		if got := StoryChangesTests(Story{Criteria: []string{text}}); got != want {
			t.Errorf("StoryChangesTests(%q) = %v, want %v", text, got, want)
		}
	}
}

func TestIsTestPath(t *testing.T) {
	for p, want := range map[string]bool{
		"add_test.go": true, "pkg/testdata/in.txt": true, "tests/test_add.sh": true, "test_add.py": true,
		"src/add.test.ts": true, "src/__tests__/a.js": true, "spec/add_spec.rb": true, "src/AddTest.java": true,
		"add.go": false, "src/add.ts": false, "README.md": false, "Makefile": false, "contest.go": false,
	} {
		if got := IsTestPath(p); got != want {
			t.Errorf("IsTestPath(%q) = %v, want %v", p, got, want)
		}
	}
	g := Guard{Defining: []string{"Makefile"}, Globs: []string{"golden/**"}}
	for _, c := range []struct {
		path    string
		existed bool
		want    bool
	}{
		{"Makefile", true, true}, {"conftest.py", false, true}, {"add_test.go", true, true}, {"new_test.go", false, false},
		{"golden/a/b.txt", false, true}, {"add.go", true, false},
		// A file a check names that the start did not have is the work.
		{"Makefile", false, false},
	} {
		if got := g.Protects(c.path, c.existed); got != c.want {
			t.Errorf("Protects(%q, existed=%v) = %v, want %v", c.path, c.existed, got, c.want)
		}
	}
}

func TestFindDefiningFollowsMakeAndPackageScripts(t *testing.T) {
	dir := t.TempDir()
	write := func(rel, body string) {
		p := filepath.Join(dir, rel)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("Makefile", "test:\n\t@sh scripts/check.sh && ./run-tests\n")
	write("scripts/check.sh", "exit 1\n")
	write("run-tests", "#!/bin/sh\n")
	write("package.json", `{"scripts": {"test": "node tools/t.js"}}`)
	write("tools/t.js", "")
	write("verify.sh", "")
	write("pytest.ini", "[pytest]\n")
	got := FindDefining(dir, []string{"make test", "npm test", "sh verify.sh --fast", "python -m pytest -q"})
	want := []string{"Makefile", "package.json", "pytest.ini", "run-tests", "scripts/check.sh", "tools/t.js", "verify.sh"}
	if !slices.Equal(got, want) {
		t.Errorf("FindDefining = %v, want %v", got, want)
	}
}

func TestMatchGlob(t *testing.T) {
	for _, c := range []struct {
		glob, path string
		want       bool
	}{
		{"tests/**", "tests/a/b.py", true}, {"**/*.snap", "a/b/c.snap", true}, {"*.snap", "deep/x.snap", true},
		{"golden/*.txt", "golden/a.txt", true}, {"golden/*.txt", "golden/a/b.txt", false}, {"src/**/fixtures/*", "src/x/fixtures/f", true},
	} {
		if got := MatchGlob(c.glob, c.path); got != c.want {
			t.Errorf("MatchGlob(%q, %q) = %v, want %v", c.glob, c.path, got, c.want)
		}
	}
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "a.snap"), nil, 0o644)
	if got := GlobsMatchingNothing(dir, []string{"*.snap", "tests/**"}); !slices.Equal(got, []string{"tests/**"}) {
		t.Errorf("GlobsMatchingNothing = %v", got)
	}
}

// The overlay puts other versions in place and the work back; a new
// Overlay on the same folder (the next start, after a kill) finds and
// restores what a killed run left.
func TestOverlayPutsTheWorkBackAfterAKill(t *testing.T) {
	root := t.TempDir()
	os.WriteFile(filepath.Join(root, "add_test.go"), []byte("agent's test\n"), 0o644)
	os.WriteFile(filepath.Join(root, "new_test.go"), []byte("agent's new test\n"), 0o644)
	ov := Overlay{Root: root, Dir: filepath.Join(t.TempDir(), "overlay")}
	err := ov.Apply([]File{
		{Path: "add_test.go", Content: []byte("start's test\n"), Mode: 0o644},
		{Path: "new_test.go", Absent: true},
		{Path: "gone/deleted_test.go", Content: []byte("deleted by the agent\n"), Mode: 0o755},
	})
	if err != nil {
		t.Fatal(err)
	}
	read := func(rel string) string {
		b, err := os.ReadFile(filepath.Join(root, rel))
		if err != nil {
			return "<absent>"
		}
		return string(b)
	}
	if read("add_test.go") != "start's test\n" || read("new_test.go") != "<absent>" || read("gone/deleted_test.go") != "deleted by the agent\n" {
		t.Fatalf("overlay not in place: %q %q %q", read("add_test.go"), read("new_test.go"), read("gone/deleted_test.go"))
	}
	// "Killed" here: a fresh Overlay value restores from the manifest.
	again := Overlay{Root: root, Dir: ov.Dir}
	if !again.Pending() {
		t.Fatal("no overlay pending after Apply")
	}
	if err := again.Restore(); err != nil {
		t.Fatal(err)
	}
	if read("add_test.go") != "agent's test\n" || read("new_test.go") != "agent's new test\n" || read("gone/deleted_test.go") != "<absent>" {
		t.Errorf("work not put back: %q %q %q", read("add_test.go"), read("new_test.go"), read("gone/deleted_test.go"))
	}
	if _, err := os.Stat(filepath.Join(root, "gone")); err == nil {
		t.Error("the folder the overlay made is still there")
	}
	if again.Pending() || again.Restore() != nil {
		t.Error("a second Restore is not a no-op")
	}
	if err := ov.Apply([]File{{Path: "../escape", Content: []byte("x")}}); err == nil {
		t.Error("a path outside the tree was accepted")
	}
}

// Under red_green a new test that passes on the start's code proves
// nothing, so the advice for a still failing check must not offer it.
func TestAdviceUnderRedGreenAsksForATestThatFailsFirst(t *testing.T) {
	start := run("go test", false, report("TestA=fail"))
	d := Compare(&start, run("go test", false, report("TestA=fail", "TestNew=pass")))
	problems := func(in Input) string {
		j := Judge(in)
		if j.Outcome != Rejected {
			t.Fatalf("Judge = %+v; want rejected", j)
		}
		return strings.Join(j.Problems, "\n")
	}
	if p := problems(Input{Story: Story{ID: "US-3"}, Diffs: []Diff{d}, RedGreen: map[string]bool{"TestNew": false}}); strings.Contains(p, "add a test that passes") || !strings.Contains(p, "fails on the start's code") {
		t.Errorf("red_green advice = %q; want a test that fails on the start's code", p)
	}
	if p := problems(Input{Story: Story{ID: "US-3"}, Diffs: []Diff{Compare(&start, run("go test", false, report("TestA=fail")))}}); !strings.Contains(p, "add a test that passes") {
		t.Errorf("advice without red_green = %q; want 'add a test that passes'", p)
	}
}
