package testreport

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// goEvent is one line of go test -json (cmd/test2json). Fields ralph does
// not use (Time, Elapsed, Key, Value, Path) are left out.
type goEvent struct {
	Action      string
	Package     string
	Test        string
	Output      string
	FailedBuild string
	ImportPath  string
}

// decodeGoEvent reads one line as an event; ok is false for anything that
// is not a JSON object with an Action (a line the go command or a test
// printed outside test2json, or garbage).
func decodeGoEvent(line []byte) (ev goEvent, ok bool) {
	i := 0
	for i < len(line) && (line[i] == ' ' || line[i] == '\t') {
		i++
	}
	if i == len(line) || line[i] != '{' {
		return goEvent{}, false
	}
	if json.Unmarshal(line[i:], &ev) != nil || ev.Action == "" {
		return goEvent{}, false
	}
	return ev, true
}

type goTest struct {
	name      string
	ran       bool // a run event was seen
	open      bool // the last run has no pass/fail/skip yet
	failed    bool // some run failed
	passed    bool
	skipped   bool
	panicked  bool // its output has a line starting "panic: "
	timeout   string
	out       tail
	seq       int // order of the final event, to find the test that panicked last
	finalSeen bool
}

type goPkg struct {
	name        string
	tests       map[string]*goTest
	order       []*goTest
	result      string // the package's own pass/fail/skip, "" if none came
	failedBuild string
	out         tail // output without a Test
	buildFailed bool // its output says "[build failed]"
	timeout     string
}

// parseGoJSON follows cmd/test2json's events. What it reads, and why:
//   - a test is identified by package and full test name (subtest names
//     contain "/" themselves, so the name is never split);
//   - a run with no pass/fail/skip after it is a test that crashed or timed
//     out (test2json gives such a test no final event), so it is a Fail and
//     gets the package's remaining output, where the panic or the timeout is;
//   - a package that fails without a failing test (build failure, crash,
//     timeout, TestMain exiting non-zero) is listed in Broken, so that
//     Failed never says "fine" about a package go test said failed;
//   - build events (ImportPath, no Package) name packages that did not
//     compile; they count only when a package fail follows, as go test
//     itself fails only then.
func parseGoJSON(b *builder, data []byte) error {
	pkgs := map[string]*goPkg{}
	var pkgOrder []*goPkg
	var pendingBuild, failedBuild []string // build-fail ImportPaths before/after a package fail
	buildSeen := map[string]bool{}
	events, seq, nTests := 0, 0, 0
	tooMany := false

	pkgOf := func(name string) *goPkg {
		p := pkgs[name]
		if p == nil {
			if len(pkgs) >= maxTests {
				tooMany = true
				return nil
			}
			p = &goPkg{name: name, tests: map[string]*goTest{}}
			pkgs[name] = p
			pkgOrder = append(pkgOrder, p)
		}
		return p
	}
	testOf := func(p *goPkg, name string) *goTest {
		t := p.tests[name]
		if t == nil {
			if nTests >= maxTests {
				tooMany = true
				return nil
			}
			nTests++
			t = &goTest{name: name}
			p.tests[name] = t
			p.order = append(p.order, t)
		}
		return t
	}

	eachLine(data, func(line []byte) bool {
		ev, ok := decodeGoEvent(line)
		if !ok {
			return true
		}
		events++
		seq++
		switch ev.Action {
		case "build-fail":
			if ev.ImportPath != "" && !buildSeen[ev.ImportPath] {
				buildSeen[ev.ImportPath] = true
				pendingBuild = append(pendingBuild, ev.ImportPath)
			}
			return true
		case "build-output", "start", "pause", "cont", "bench", "attr", "artifacts":
			return true
		}
		p := pkgOf(ev.Package)
		if p == nil {
			return true
		}
		if ev.Test == "" {
			switch ev.Action {
			case "output":
				p.out.add(ev.Output)
				if strings.Contains(ev.Output, "[build failed]") {
					p.buildFailed = true
				}
				if s, ok := strings.CutPrefix(ev.Output, "panic: test timed out after "); ok {
					p.timeout = "test timed out after " + strings.TrimSpace(s)
				}
			case "pass", "fail", "skip":
				p.result = ev.Action
				if ev.Action == "fail" {
					if ev.FailedBuild != "" {
						p.failedBuild = ev.FailedBuild
					}
					failedBuild = append(failedBuild, pendingBuild...)
					pendingBuild = nil
				}
			}
			return true
		}
		t := testOf(p, ev.Test)
		if t == nil {
			return true
		}
		switch ev.Action {
		case "run":
			t.ran, t.open = true, true
		case "output":
			t.out.add(ev.Output)
			if strings.HasPrefix(ev.Output, "panic: ") {
				t.panicked = true
				if s, ok := strings.CutPrefix(ev.Output, "panic: test timed out after "); ok {
					t.timeout = "test timed out after " + strings.TrimSpace(s)
				}
			}
		case "pass":
			t.passed, t.open, t.finalSeen, t.seq = true, false, true, seq
		case "fail":
			t.failed, t.open, t.finalSeen, t.seq = true, false, true, seq
		case "skip":
			t.skipped, t.open, t.finalSeen, t.seq = true, false, true, seq
		}
		return true
	})
	if events == 0 {
		return errors.New("testreport: not go test -json output: no JSON event lines")
	}
	if tooMany {
		b.broke(fmt.Sprintf("report: too many tests (only the first %d are read)", maxTests))
	}

	slices.SortFunc(pkgOrder, func(a, c *goPkg) int { return strings.Compare(a.name, c.name) })
	covered := map[string]bool{} // FailedBuild values already reported as "PKG: build failed"
	for _, p := range pkgOrder {
		label := p.name
		if label == "" {
			label = "tests" // test2json run on a bare test binary has no Package
		}
		var unfinished, failing int
		var lastPanic *goTest
		timeout := p.timeout
		for _, t := range p.order {
			if !t.ran && !t.finalSeen {
				continue // output only: nothing says this test ran
			}
			st := Pass
			switch {
			case t.failed || t.open:
				st = Fail
			case t.passed:
				st = Pass
			case t.skipped:
				st = Skip
			}
			out := ""
			if st == Fail {
				failing++
				if t.open {
					unfinished++
					t.out.add(string(p.out.b))
				}
				if t.panicked && (lastPanic == nil || t.seq > lastPanic.seq) {
					lastPanic = t
				}
				if t.timeout != "" {
					timeout = t.timeout
				}
				out = t.out.String()
			}
			id := ev2ID(p.name, t.name)
			if !b.add(Test{ID: id, Name: capID(t.name), Group: capID(p.name), Status: st, Output: out}) {
				break
			}
		}
		switch p.result {
		case "fail":
			switch {
			case p.failedBuild != "" || (p.buildFailed && len(p.order) == 0):
				b.broke(label + ": build failed")
				// Its own build (the package, its test variant "p [p.test]"
				// or its external tests "p_test [p.test]") needs no second
				// entry; a dependency that did not build gets its own.
				if path := importPath(p.failedBuild); path == p.name || path == p.name+"_test" {
					covered[p.failedBuild] = true
				}
			case len(p.order) == 0:
				b.broke(label + ": failed without test results")
			case unfinished > 0 && timeout != "":
				b.broke(fmt.Sprintf("%s: %s, %s unfinished", label, timeout, plural(unfinished, "test", "tests")))
			case unfinished > 0:
				b.broke(fmt.Sprintf("%s: test binary crashed, %s unfinished", label, plural(unfinished, "test", "tests")))
			case lastPanic != nil:
				b.broke(fmt.Sprintf("%s: test binary panicked in %s, later tests did not run", label, capID(lastPanic.name)))
			case failing == 0:
				b.broke(label + ": failed although no test failed")
			}
		case "":
			b.broke(label + ": no final result (the output was cut short)")
		}
	}
	for _, ip := range failedBuild {
		if covered[ip] {
			continue
		}
		b.broke(capID(importPath(ip)) + ": build failed")
	}
	return nil
}

// importPath drops the " [p.test]" variant suffix of a build ImportPath.
func importPath(ip string) string {
	path, _, _ := strings.Cut(ip, " [")
	return path
}

func ev2ID(pkg, test string) string {
	if pkg == "" {
		return capID(test)
	}
	return capID(pkg + " " + test)
}

// GoJSONText turns go test -json output back into the text go test prints
// without -json (the concatenated "Output" fields, plus any non-JSON lines
// kept in order), so people and agents can read it: a failing check's
// output goes into the next prompt, and JSON events would waste the
// agent's context on quoting.
func GoJSONText(data []byte) string {
	cut := len(data) > maxInput
	if cut {
		data = data[:maxInput]
	}
	var sb strings.Builder
	eachLine(data, func(line []byte) bool {
		if ev, ok := decodeGoEvent(line); ok {
			if ev.Action == "output" || ev.Action == "build-output" {
				sb.WriteString(ev.Output)
			}
			return true
		}
		sb.Write(line)
		sb.WriteByte('\n')
		return true
	})
	if cut {
		sb.WriteString("[ralph: output cut at 64 MiB]\n")
	}
	return sb.String()
}
