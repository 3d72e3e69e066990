package testreport

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// tapPoint is one "ok"/"not ok" line.
type tapPoint struct {
	ok        bool
	num       string // the test number as written, "" if none
	desc      string // description, unescaped
	directive string // "skip", "todo" or ""
}

// parsePoint reads a test point: "ok", "not ok", then optionally a number,
// optionally a dash, the description and a "# SKIP"/"# TODO" directive
// (case-insensitive; a "\#" in the description is a literal '#').
func parsePoint(s string) (tapPoint, bool) {
	var p tapPoint
	rest, ok := strings.CutPrefix(s, "not ok")
	if !ok {
		if rest, ok = strings.CutPrefix(s, "ok"); !ok {
			return tapPoint{}, false
		}
		p.ok = true
	}
	if rest != "" && rest[0] != ' ' && rest[0] != '\t' {
		return tapPoint{}, false // "okay", "not okay"
	}
	rest = strings.TrimLeft(rest, " \t")
	i := 0
	for i < len(rest) && rest[i] >= '0' && rest[i] <= '9' {
		i++
	}
	if i > 0 && (i == len(rest) || rest[i] == ' ' || rest[i] == '\t') {
		p.num = rest[:i]
		rest = strings.TrimLeft(rest[i:], " \t")
	}
	if rest == "-" || strings.HasPrefix(rest, "- ") || strings.HasPrefix(rest, "-\t") {
		rest = strings.TrimLeft(rest[1:], " \t")
	}
	desc, dir := splitDirective(rest)
	p.desc, p.directive = tapUnescape(strings.TrimSpace(desc)), dir
	return p, true
}

// splitDirective finds the first unescaped '#' followed by SKIP or TODO.
// Other '#'s belong to the description ("ok 1 - issue #42").
func splitDirective(s string) (desc, directive string) {
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++
		case '#':
			after := strings.TrimLeft(s[i+1:], " \t")
			if len(after) >= 4 {
				if w := strings.ToLower(after[:4]); w == "skip" || w == "todo" {
					return s[:i], w
				}
			}
		}
	}
	return s, ""
}

func tapUnescape(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var sb strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+1 < len(s) && (s[i+1] == '#' || s[i+1] == '\\') {
			i++
		}
		sb.WriteByte(s[i])
	}
	return sb.String()
}

// parsePlan reads "1..N", optionally followed by "# skip reason".
func parsePlan(s string) (int, bool) {
	rest, ok := strings.CutPrefix(s, "1..")
	if !ok {
		return 0, false
	}
	i := 0
	for i < len(rest) && rest[i] >= '0' && rest[i] <= '9' {
		i++
	}
	if i == 0 || i > 9 {
		return 0, false
	}
	if tail := strings.TrimSpace(rest[i:]); tail != "" && tail[0] != '#' {
		return 0, false
	}
	n, err := strconv.Atoi(rest[:i])
	return n, err == nil
}

func isPlan(s string) bool { _, ok := parsePlan(s); return ok }

// tapFrame is one level of TAP14 subtest nesting: the top-level stream, or
// a child stream indented by four more spaces.
type tapFrame struct {
	parent  *tapFrame
	level   int
	first   int    // index of the first test recorded inside this block
	header  string // the "# Subtest: name" that opened it, if any
	named   bool   // header is set
	seg     string // its path segment with occurrence suffix, set when it is closed
	points  int    // test points at this level
	plan    int
	hasPlan bool
	failed  bool // a Fail was recorded inside
	occ     map[string]int

	pending    string // a "# Subtest:" at this level whose test has not ended yet
	hasPending bool
	closed     *tapFrame // a child block that ended and waits for the test point closing it

	path     string
	pathDone bool
}

// occur gives name its occurrence suffix at this level: the second "same
// name" becomes "same name #2", as node:test keeps duplicate names.
func (f *tapFrame) occur(name string) string {
	if f.occ == nil {
		f.occ = map[string]int{}
	}
	f.occ[name]++
	if n := f.occ[name]; n > 1 {
		return fmt.Sprintf("%s #%d", name, n)
	}
	return name
}

type tapTest struct {
	frame   *tapFrame
	seg     string // name with occurrence suffix, the last part of the ID
	name    string
	status  Status
	subtest bool // a parent recorded because it failed and no child did
	out     tail
}

// parseTAP reads TAP 13/14 (and TAP without a version line). Only leaf test
// points become tests: a parent's point summarises its children, and
// counting it too would count each failure twice. A parent that fails
// while none of its children did (a hook or the subtest itself threw) is
// recorded so that its failure is not lost. Lines that are not TAP (stderr
// mixed in, a program's own prints) are ignored, and they never change the
// nesting, which only test points, plans and "# Subtest:" lines do.
func parseTAP(b *builder, data []byte) error {
	root := &tapFrame{}
	stack := []*tapFrame{root}
	var (
		tests         []*tapTest
		planned       []*tapFrame
		points        int
		sawPlan       bool
		bailed        bool
		tooDeep       bool
		tooMany       bool
		inYAML        bool
		yamlIndent    int
		yamlTo        *tapTest
		lastWasPoint  bool
		lastPointTest *tapTest
		lastIndent    int
	)
	top := func() *tapFrame { return stack[len(stack)-1] }
	record := func(f *tapFrame, seg, name string, st Status) *tapTest {
		if len(tests) >= maxTests {
			tooMany = true
			return nil
		}
		t := &tapTest{frame: f, seg: seg, name: name, status: st}
		tests = append(tests, t)
		if st == Fail {
			f.failed = true
		}
		return t
	}
	neverEnded := func(f *tapFrame, name string) {
		if t := record(f, f.occur(name), name, Fail); t != nil {
			t.out.add("[ralph: this test started (# Subtest: " + name + ") and never ended]")
		}
	}
	// settle closes a child block that never got its closing test point:
	// its tests keep their place under its name, and if it was announced by
	// "# Subtest:" it is a test that started and never ended.
	settle := func(f *tapFrame) {
		blk := f.closed
		if blk == nil {
			return
		}
		f.closed = nil
		name := blk.header
		if !blk.named {
			name = "#" + strconv.Itoa(f.points+1)
		}
		blk.seg = f.occur(name)
		if blk.failed {
			f.failed = true
		}
		if blk.named {
			if t := record(f, blk.seg, name, Fail); t != nil {
				t.subtest = true
				t.out.add("[ralph: this subtest has no closing test point]")
			}
		}
	}
	pop := func() {
		f := top()
		stack = stack[:len(stack)-1]
		settle(f)
		if f.hasPending {
			f.hasPending = false
			neverEnded(f, f.pending)
		}
		p := top()
		settle(p)
		p.closed = f
	}
	// push opens a child block. Blocks count against the same budget as
	// tests: a stream that jumps 64 levels deep on every other line would
	// otherwise build millions of frames, each test keeping its chain alive.
	frames := 0
	push := func() bool {
		if frames >= maxTests {
			tooMany = true
			return false
		}
		frames++
		p := top()
		settle(p)
		f := &tapFrame{parent: p, level: p.level + 1, first: len(tests)}
		if p.hasPending {
			f.header, f.named, p.hasPending = p.pending, true, false
		}
		stack = append(stack, f)
		return true
	}

	eachLine(data, func(line []byte) bool {
		s := string(line)
		indent := 0
		for indent < len(s) && s[indent] == ' ' {
			indent++
		}
		content := strings.TrimSpace(s)
		if inYAML {
			if content == "..." && indent == yamlIndent {
				inYAML = false
				return true
			}
			if content == "" || indent >= yamlIndent {
				if yamlTo != nil {
					yamlTo.out.add(s[min(yamlIndent, indent):] + "\n")
				}
				return true
			}
			inYAML = false // a block cut short: read this line as TAP
		}
		if content == "" {
			return true
		}
		wasPoint := lastWasPoint
		lastWasPoint = false
		if content == "---" && wasPoint && indent > lastIndent {
			inYAML, yamlIndent, yamlTo = true, indent, nil
			if lastPointTest != nil && lastPointTest.status == Fail {
				yamlTo = lastPointTest
			}
			return true
		}

		var (
			point    tapPoint
			isPoint  bool
			plan     int
			isPlanL  bool
			subtest  string
			isHeader bool
		)
		switch {
		case strings.HasPrefix(content, "Bail out!"):
			reason := strings.TrimSpace(strings.TrimPrefix(content, "Bail out!"))
			if reason == "" {
				reason = "no reason given"
			}
			b.broke("bail out: " + capID(reason))
			bailed = true
			return false
		case strings.HasPrefix(content, "# Subtest"):
			rest := strings.TrimPrefix(content, "# Subtest")
			if rest != "" && rest[0] != ':' && rest[0] != ' ' {
				return true // "# Subtests ran: 3" is a comment
			}
			subtest, isHeader = tapUnescape(strings.TrimSpace(strings.TrimPrefix(rest, ":"))), true
		default:
			if plan, isPlanL = parsePlan(content); !isPlanL {
				if point, isPoint = parsePoint(content); !isPoint {
					return true // a comment, "TAP version", or not TAP at all
				}
			}
		}
		level := indent / 4
		if level > maxDepth {
			tooDeep = true
			return true
		}
		for top().level > level {
			pop()
		}
		for top().level < level {
			if !push() {
				return false
			}
		}
		f := top()
		switch {
		case isHeader:
			settle(f)
			if f.hasPending {
				neverEnded(f, f.pending)
			}
			f.pending, f.hasPending = capID(subtest), true
		case isPlanL:
			settle(f)
			sawPlan = true
			if !f.hasPlan {
				f.plan, f.hasPlan = plan, true
				planned = append(planned, f)
			}
		case isPoint:
			f.points++
			points++
			st := Pass
			switch {
			case point.directive != "":
				st = Skip
			case !point.ok:
				st = Fail
			}
			name := capID(point.desc)
			if name == "" {
				name = "#" + point.num
				if point.num == "" {
					name = "#" + strconv.Itoa(f.points)
				}
				name = capID(name)
			}
			var t *tapTest
			if blk := f.closed; blk != nil {
				// This point closes the subtest block just above it.
				f.closed = nil
				f.hasPending = false
				if blk.named {
					name = blk.header
				}
				blk.seg = f.occur(name)
				inner := tests[blk.first:]
				if point.directive != "" {
					// A failure inside a TODO (or skipped) subtest is
					// expected, as the directive says; not a failure.
					for _, c := range inner {
						if c.status == Fail {
							c.status = Skip
						}
					}
					blk.failed = false
				}
				if blk.failed {
					f.failed = true
				}
				switch {
				case blk.points == 0 && len(inner) == 0:
					t = record(f, blk.seg, name, st) // an empty block: the point is a leaf
				case st == Fail && !blk.failed:
					if t = record(f, blk.seg, name, st); t != nil {
						t.subtest = true
					}
				}
			} else {
				f.hasPending = false
				t = record(f, f.occur(name), name, st)
			}
			lastWasPoint, lastPointTest, lastIndent = true, t, indent
		}
		return !tooMany
	})
	for len(stack) > 1 {
		pop()
	}
	settle(root)
	if root.hasPending {
		root.hasPending = false
		neverEnded(root, root.pending)
	}
	if points == 0 && !sawPlan && !bailed {
		return errors.New("testreport: not TAP: no test points, plan or Bail out!")
	}

	var pathOf func(f *tapFrame) string
	pathOf = func(f *tapFrame) string {
		if f.parent == nil {
			return ""
		}
		if !f.pathDone {
			pp := pathOf(f.parent)
			if pp == "" {
				f.path = f.seg
			} else {
				f.path = capID(pp + " > " + f.seg)
			}
			f.pathDone = true
		}
		return f.path
	}
	for _, t := range tests {
		id, group := t.seg, ""
		if t.subtest && t.frame == root {
			group = t.seg
		}
		if p := pathOf(t.frame); p != "" {
			id = capID(p + " > " + t.seg)
			g := t.frame
			for g.parent != root {
				g = g.parent
			}
			group = g.seg
		}
		out := ""
		if t.status == Fail {
			out = strings.TrimRight(t.out.String(), "\n")
		}
		b.add(Test{ID: id, Name: t.name, Group: group, Status: t.status, Output: out})
	}
	if tooMany {
		b.broke(fmt.Sprintf("report: too many tests (only the first %d are read)", maxTests))
	}
	if tooDeep {
		b.broke(fmt.Sprintf("report: subtests nested deeper than %d levels were skipped", maxDepth))
	}
	if bailed || tooMany {
		return nil // the plan cannot have been met; the reason is already in Broken
	}
	for _, f := range planned {
		if f.plan == f.points {
			continue
		}
		msg := fmt.Sprintf("planned %d tests, ran %d", f.plan, f.points)
		if p := pathOf(f); p != "" {
			msg = p + ": " + msg
		}
		b.broke(msg)
	}
	if !root.hasPlan && root.points > 0 {
		b.broke("report: no TAP plan (1..N) at the top level, so the output may be cut short")
	}
	return nil
}
