package testreport

import (
	"bufio"
	"bytes"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"
)

// junitKind says what an open XML element means to the parser.
type junitKind uint8

const (
	kOther     junitKind = iota
	kSuite               // <testsuite>: its name is part of the IDs below it
	kCase                // <testcase>
	kCapture             // failure/error/rerunFailure/rerunError: its text is the output
	kSysOut              // system-out/system-err of a testcase
	kInert               // inside a testcase, ignored (flakyFailure, properties, ...)
	kIgnored             // a second root that is not a test report
	kInCapture           // an element nested in a kCapture or kSysOut one
)

type junitOpen struct {
	kind junitKind
	path string // suite path at this element (for kSuite, including itself)
	top  bool   // no enclosing testsuite
}

type junitCase struct {
	id, name, group string
	class           string
	failed, skipped bool
	collection      bool // pytest's collection error: classname="" and error message "collection failure"
	fail, sys       tail
}

// parseJUnit walks <testsuites>/<testsuite> (any depth) to <testcase> with
// encoding/xml's Decoder one token at a time: Unmarshal into nested structs
// recurses once per level, and a report is input an agent can write, so
// depth is capped here instead (maxDepth) along with the test count.
//
// A test's ID is its suite path (enclosing testsuite names joined by " > ",
// leaving out a top-level suite named "pytest" or with no name, which every
// pytest test shares), its classname, its file attribute and its name,
// joined by " :: ". Empty parts are left out, so a pytest test is
// "tests.test_a :: test_ok", not " :: tests.test_a :: test_ok". The path
// matters because node:test gives every test the classname "test" and
// keeps duplicate names; a repeat gets " #2", " #3" in document order.
//
// A DOCTYPE is refused outright: no test runner writes one, and it is the
// vehicle of entity-expansion and external-entity tricks.
func parseJUnit(b *builder, data []byte) error {
	data = trimBOM(data)
	if len(bytes.TrimSpace(data)) == 0 {
		return errors.New("testreport: not a JUnit report: empty")
	}
	d := xml.NewDecoder(bytes.NewReader(data))
	d.Strict = true // unknown entities and mismatched tags are errors, not guesses
	d.CharsetReader = junitCharset

	var (
		stack  []junitOpen
		cur    *junitCase
		cases  int  // testcases started
		rooted bool // the first root element was a test report
	)
	// stop turns a problem into an error before any testcase was seen (the
	// data is then not a report we can read) and into Broken after.
	stop := func(reason string, err error) error {
		if cases == 0 {
			return err
		}
		if cur != nil {
			// A testcase that started and never ended is a Fail: a failure
			// written just before the cut must not become a pass.
			cur.failed = true
			cur.fail.add("\n[ralph: the report ends inside this test]")
			endCase(b, cur)
		}
		b.broke(reason)
		return nil
	}
	for {
		tok, err := d.Token()
		if err == io.EOF {
			if !rooted {
				return errors.New("testreport: not a JUnit report: no XML element")
			}
			if len(stack) > 0 {
				return stop("report: truncated XML", errors.New("testreport: not a JUnit report: it ends before its first test"))
			}
			return nil
		}
		if err != nil {
			var se *xml.SyntaxError
			if errors.As(err, &se) && strings.Contains(se.Msg, "unexpected EOF") {
				return stop("report: truncated XML", fmt.Errorf("testreport: not a JUnit report: %w", err))
			}
			return stop(fmt.Sprintf("report: invalid XML, read up to the error (%s)", capID(err.Error())), fmt.Errorf("testreport: not a JUnit report: %w", err))
		}
		switch t := tok.(type) {
		case xml.Directive:
			return stop("report: XML with a DOCTYPE or other directive, read up to it", errors.New("testreport: JUnit report refused: it has a DOCTYPE or other XML directive"))
		case xml.StartElement:
			if len(stack) >= maxDepth {
				return stop(fmt.Sprintf("report: XML nested deeper than %d levels, read up to there", maxDepth),
					fmt.Errorf("testreport: JUnit report refused: XML nested deeper than %d levels", maxDepth))
			}
			name := t.Name.Local
			parent := junitOpen{top: true}
			if len(stack) > 0 {
				parent = stack[len(stack)-1]
			} else if !rooted {
				if name != "testsuites" && name != "testsuite" {
					return fmt.Errorf("testreport: not a JUnit report: the root element is <%s>", capID(name))
				}
				rooted = true
			} else if name != "testsuites" && name != "testsuite" {
				parent.kind = kIgnored
			}
			open := junitOpen{kind: kOther, path: parent.path, top: parent.top}
			switch parent.kind {
			case kIgnored:
				open.kind = kIgnored
			case kCapture, kSysOut, kInCapture:
				open.kind = kInCapture
			case kCase:
				switch name {
				case "failure", "error", "rerunFailure", "rerunError":
					open.kind = kCapture
					cur.failed = true
					msg := attr(t, "message")
					if name == "error" && msg == "collection failure" && cur.class == "" {
						cur.collection = true
					}
					if msg != "" {
						cur.fail.add(msg)
						cur.fail.add("\n")
					}
				case "skipped":
					open.kind = kInert
					cur.skipped = true
				case "system-out", "system-err":
					open.kind = kSysOut
				default: // flakyFailure/flakyError (passed on a rerun), properties, ...
					open.kind = kInert
				}
			case kInert:
				open.kind = kInert
			default:
				switch name {
				case "testsuite":
					open.kind = kSuite
					open.top = false
					if n := capID(attr(t, "name")); n != "" && !(parent.top && n == "pytest") {
						if open.path == "" {
							open.path = n
						} else {
							open.path = capID(open.path + " > " + n)
						}
					}
				case "testcase":
					if b.full() {
						return nil
					}
					open.kind = kCase
					cases++
					cur = newCase(open.path, t)
				}
			}
			stack = append(stack, open)
		case xml.EndElement:
			if len(stack) == 0 {
				continue // Strict mode refuses this already; never index out of range
			}
			open := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			switch open.kind {
			case kCase:
				endCase(b, cur)
				cur = nil
				if b.full() {
					return nil
				}
			case kCapture:
				cur.fail.add("\n")
			case kSysOut:
				cur.sys.add("\n")
			}
		case xml.CharData:
			if len(stack) == 0 || cur == nil {
				continue
			}
			switch stack[len(stack)-1].kind {
			case kCapture:
				cur.fail.add(string(t))
			case kSysOut:
				cur.sys.add(string(t))
			case kInCapture:
				// Text nested deeper (Surefire's <stackTrace> in a
				// rerunFailure) belongs to whichever capture encloses it.
				for i := len(stack) - 1; i >= 0; i-- {
					if k := stack[i].kind; k == kCapture {
						cur.fail.add(string(t))
						break
					} else if k == kSysOut {
						cur.sys.add(string(t))
						break
					}
				}
			}
		}
	}
}

func newCase(path string, t xml.StartElement) *junitCase {
	class, file, name := capID(attr(t, "classname")), capID(attr(t, "file")), capID(attr(t, "name"))
	var parts []string
	for _, p := range []string{path, class, file, name} {
		if p != "" {
			parts = append(parts, p)
		}
	}
	group := class
	if group == "" {
		group = file
	}
	return &junitCase{id: capID(strings.Join(parts, " :: ")), name: name, group: group, class: class}
}

func endCase(b *builder, c *junitCase) {
	st := Pass
	switch {
	case c.failed:
		st = Fail
	case c.skipped:
		st = Skip
	}
	out := ""
	if st == Fail {
		out = strings.TrimSpace(string(c.fail.b) + string(c.sys.b))
		out = clipOutput(out)
	}
	if c.collection {
		b.broke(c.name + ": collection failure")
	}
	b.add(Test{ID: c.id, Name: c.name, Group: c.group, Status: st, Output: out})
}

func attr(t xml.StartElement, name string) string {
	for _, a := range t.Attr {
		if a.Name.Local == name && a.Name.Space == "" {
			return a.Value
		}
	}
	return ""
}

// junitCharset lets a report declare Latin-1 (some JVM setups do); any
// other non-UTF-8 charset is refused rather than misread.
func junitCharset(charset string, in io.Reader) (io.Reader, error) {
	switch strings.ToLower(charset) {
	case "us-ascii", "ascii":
		return in, nil
	case "iso-8859-1", "iso8859-1", "latin1", "latin-1":
		return &latin1Reader{r: bufio.NewReader(in)}, nil
	}
	return nil, fmt.Errorf("unsupported charset %q", capID(charset))
}

type latin1Reader struct {
	r   *bufio.Reader
	buf []byte
}

func (l *latin1Reader) Read(p []byte) (int, error) {
	if len(l.buf) == 0 {
		var chunk [4096]byte
		n, err := l.r.Read(chunk[:])
		if n == 0 {
			return 0, err
		}
		l.buf = l.buf[:0]
		for _, c := range chunk[:n] {
			l.buf = utf8.AppendRune(l.buf, rune(c))
		}
	}
	n := copy(p, l.buf)
	l.buf = l.buf[n:]
	return n, nil
}
