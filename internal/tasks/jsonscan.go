package tasks

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// jkind is the type of a JSON value.
type jkind uint8

const (
	jNull jkind = iota
	jBool
	jNumber
	jString
	jArray
	jObject
)

func (k jkind) String() string {
	return [...]string{"null", "a boolean", "a number", "a string", "an array", "an object"}[k]
}

// jvalue is a JSON value with the byte range it occupies, which is what a
// surgical edit replaces. encoding/json cannot provide ranges for nested
// values cheaply, so prd.json is read with this small parser instead.
type jvalue struct {
	kind       jkind
	start, end int    // data[start:end] is the value's text
	str        string // decoded string; source text of numbers; "true"/"false"
	members    []jmember
	elems      []*jvalue
}

// jmember is one "key": value pair of an object.
type jmember struct {
	key              string
	keyStart, keyEnd int // the key's quoted text
	value            *jvalue
}

// get returns the value of key in an object, or nil.
func (v *jvalue) get(key string) *jvalue {
	if v == nil {
		return nil
	}
	for i := range v.members {
		if v.members[i].key == key {
			return v.members[i].value
		}
	}
	return nil
}

// jsonSyntaxError is a syntax error at a byte offset.
type jsonSyntaxError struct {
	off int
	msg string
}

func (e *jsonSyntaxError) Error() string { return e.msg }

// maxJSONDepth bounds nesting so a hostile file cannot exhaust the stack.
const maxJSONDepth = 1000

type jparser struct {
	data  []byte
	text  string // data as a string: keys and strings without escapes are substrings of it
	pos   int
	depth int
	lines *lineIndex
	slab  []jvalue // values are carved from chunks to save an allocation each
}

// newValue returns a zeroed value from the current chunk.
func (p *jparser) newValue(kind jkind, start int) *jvalue {
	if len(p.slab) == 0 {
		p.slab = make([]jvalue, 256)
	}
	v := &p.slab[0]
	p.slab = p.slab[1:]
	v.kind, v.start = kind, start
	return v
}

func (p *jparser) parse() (*jvalue, error) {
	if bytes.HasPrefix(p.data, []byte(byteOrderMark)) {
		p.pos = len(byteOrderMark)
	}
	p.ws()
	v, err := p.value()
	if err != nil {
		return nil, err
	}
	p.ws()
	if p.pos < len(p.data) {
		return nil, p.fail(p.pos, "unexpected %s after the end of the JSON value", p.describe())
	}
	return v, nil
}

func (p *jparser) fail(off int, format string, args ...any) error {
	return &jsonSyntaxError{off: off, msg: fmt.Sprintf(format, args...)}
}

// describe names the byte at pos for error messages.
func (p *jparser) describe() string {
	if p.pos >= len(p.data) {
		return "end of file"
	}
	r, _ := utf8.DecodeRune(p.data[p.pos:])
	return strconv.QuoteRune(r)
}

func (p *jparser) ws() {
	for p.pos < len(p.data) {
		switch p.data[p.pos] {
		case ' ', '\t', '\n', '\r':
			p.pos++
		default:
			return
		}
	}
}

func (p *jparser) value() (*jvalue, error) {
	if p.pos >= len(p.data) {
		return nil, p.fail(p.pos, "unexpected end of file, expected a value")
	}
	switch c := p.data[p.pos]; {
	case c == '{':
		return p.object()
	case c == '[':
		return p.array()
	case c == '"':
		start := p.pos
		s, err := p.string()
		if err != nil {
			return nil, err
		}
		v := p.newValue(jString, start)
		v.end, v.str = p.pos, s
		return v, nil
	case c == '-' || (c >= '0' && c <= '9'):
		return p.number()
	case c == 't':
		return p.literal("true", jBool)
	case c == 'f':
		return p.literal("false", jBool)
	case c == 'n':
		return p.literal("null", jNull)
	}
	return nil, p.fail(p.pos, "unexpected %s, expected a value", p.describe())
}

func (p *jparser) literal(word string, kind jkind) (*jvalue, error) {
	if !bytes.HasPrefix(p.data[p.pos:], []byte(word)) {
		return nil, p.fail(p.pos, "invalid literal, expected %s", word)
	}
	v := p.newValue(kind, p.pos)
	v.end, v.str = p.pos+len(word), word
	p.pos += len(word)
	return v, nil
}

func (p *jparser) number() (*jvalue, error) {
	start := p.pos
	d := p.data
	i := p.pos
	if i < len(d) && d[i] == '-' {
		i++
	}
	digits := func() int {
		n := 0
		for i < len(d) && d[i] >= '0' && d[i] <= '9' {
			i++
			n++
		}
		return n
	}
	switch {
	case i < len(d) && d[i] == '0':
		i++
	case digits() == 0:
		return nil, p.fail(start, "invalid number")
	}
	if i < len(d) && d[i] == '.' {
		i++
		if digits() == 0 {
			return nil, p.fail(start, "invalid number: digits must follow the decimal point")
		}
	}
	if i < len(d) && (d[i] == 'e' || d[i] == 'E') {
		i++
		if i < len(d) && (d[i] == '+' || d[i] == '-') {
			i++
		}
		if digits() == 0 {
			return nil, p.fail(start, "invalid number: digits must follow the exponent")
		}
	}
	p.pos = i
	v := p.newValue(jNumber, start)
	v.end, v.str = i, p.text[start:i]
	return v, nil
}

// string parses a quoted string at pos and returns it decoded.
func (p *jparser) string() (string, error) {
	start := p.pos
	d := p.data
	i := start + 1
	escaped := false
	for {
		if i >= len(d) {
			return "", p.fail(start, "unterminated string")
		}
		c := d[i]
		if c == '"' {
			break
		}
		if c == '\n' {
			// Most often a missing closing quote; the string's start is
			// where to look.
			return "", p.fail(start, "unterminated string: a string cannot span lines (end it with \", or write a line break as \\n)")
		}
		if c < 0x20 {
			return "", p.fail(i, "control character in string: escape it (\\n, \\t, \\u00XX)")
		}
		if c == '\\' {
			escaped = true
			i++
		}
		i++
	}
	p.pos = i + 1
	if !escaped {
		return p.text[start+1 : i], nil
	}
	return p.unescape(start+1, i)
}

// unescape decodes the escapes of the string body d[from:to].
func (p *jparser) unescape(from, to int) (string, error) {
	d := p.data
	out := make([]byte, 0, to-from)
	for i := from; i < to; {
		c := d[i]
		if c != '\\' {
			out = append(out, c)
			i++
			continue
		}
		if i+1 >= to {
			return "", p.fail(i, "invalid escape")
		}
		switch e := d[i+1]; e {
		case '"', '\\', '/':
			out = append(out, e)
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case 'u':
			r, ok := hex4(d, i+2, to)
			if !ok {
				return "", p.fail(i, `invalid \u escape: want four hex digits`)
			}
			i += 6
			if utf16.IsSurrogate(r) {
				if r2, ok := hex4(d, i+2, to); ok && i+1 < to && d[i] == '\\' && d[i+1] == 'u' {
					if dec := utf16.DecodeRune(r, r2); dec != utf8.RuneError {
						out = utf8.AppendRune(out, dec)
						i += 6
						continue
					}
				}
				r = utf8.RuneError
			}
			out = utf8.AppendRune(out, r)
			continue
		default:
			return "", p.fail(i, "invalid escape \\%c", e)
		}
		i += 2
	}
	return string(out), nil
}

func hex4(d []byte, at, limit int) (rune, bool) {
	if at+4 > limit {
		return 0, false
	}
	n, err := strconv.ParseUint(string(d[at:at+4]), 16, 32)
	return rune(n), err == nil
}

func (p *jparser) enter(at int) error {
	p.depth++
	if p.depth > maxJSONDepth {
		return p.fail(at, "nesting deeper than %d levels", maxJSONDepth)
	}
	return nil
}

func (p *jparser) object() (*jvalue, error) {
	v := p.newValue(jObject, p.pos)
	if err := p.enter(p.pos); err != nil {
		return nil, err
	}
	defer func() { p.depth-- }()
	p.pos++
	p.ws()
	if p.pos < len(p.data) && p.data[p.pos] == '}' {
		p.pos++
		v.end = p.pos
		return v, nil
	}
	// Stories have around eight members; starting there saves the
	// repeated growth that dominated profiles of large files.
	v.members = make([]jmember, 0, 8)
	var seen map[string]int // built only for large objects
	for {
		if p.pos >= len(p.data) || p.data[p.pos] != '"' {
			if len(v.members) > 0 && p.pos < len(p.data) && p.data[p.pos] == '}' {
				return nil, p.fail(p.pos, "trailing comma before '}'")
			}
			return nil, p.fail(p.pos, "unexpected %s, expected a string key", p.describe())
		}
		keyStart := p.pos
		key, err := p.string()
		if err != nil {
			return nil, err
		}
		keyEnd := p.pos
		if first := p.findKey(v, key, &seen); first >= 0 {
			return nil, p.fail(keyStart, "duplicate key %q (first on line %d)", key, p.lines.pos(first).line)
		}
		p.ws()
		if p.pos >= len(p.data) || p.data[p.pos] != ':' {
			return nil, p.fail(p.pos, "unexpected %s, expected ':' after the key %q", p.describe(), key)
		}
		p.pos++
		p.ws()
		val, err := p.value()
		if err != nil {
			return nil, err
		}
		v.members = append(v.members, jmember{key: key, keyStart: keyStart, keyEnd: keyEnd, value: val})
		if seen != nil {
			seen[key] = keyStart
		}
		p.ws()
		if p.pos < len(p.data) && p.data[p.pos] == ',' {
			p.pos++
			p.ws()
			continue
		}
		if p.pos < len(p.data) && p.data[p.pos] == '}' {
			p.pos++
			v.end = p.pos
			return v, nil
		}
		return nil, p.fail(p.pos, "unexpected %s, expected ',' or '}' after an object member", p.describe())
	}
}

// findKey returns where key was first defined in the object so far, or -1.
// Small objects are scanned; a map takes over for large ones so parsing
// stays linear.
func (p *jparser) findKey(v *jvalue, key string, seen *map[string]int) int {
	const scanLimit = 16
	if *seen == nil {
		for i := range v.members {
			if v.members[i].key == key {
				return v.members[i].keyStart
			}
		}
		if len(v.members) >= scanLimit {
			*seen = make(map[string]int, 2*scanLimit)
			for i := range v.members {
				(*seen)[v.members[i].key] = v.members[i].keyStart
			}
		}
		return -1
	}
	if at, ok := (*seen)[key]; ok {
		return at
	}
	return -1
}

func (p *jparser) array() (*jvalue, error) {
	v := p.newValue(jArray, p.pos)
	if err := p.enter(p.pos); err != nil {
		return nil, err
	}
	defer func() { p.depth-- }()
	p.pos++
	p.ws()
	if p.pos < len(p.data) && p.data[p.pos] == ']' {
		p.pos++
		v.end = p.pos
		return v, nil
	}
	for {
		if len(v.elems) > 0 && p.pos < len(p.data) && p.data[p.pos] == ']' {
			return nil, p.fail(p.pos, "trailing comma before ']'")
		}
		elem, err := p.value()
		if err != nil {
			return nil, err
		}
		v.elems = append(v.elems, elem)
		p.ws()
		if p.pos < len(p.data) && p.data[p.pos] == ',' {
			p.pos++
			p.ws()
			continue
		}
		if p.pos < len(p.data) && p.data[p.pos] == ']' {
			p.pos++
			v.end = p.pos
			return v, nil
		}
		return nil, p.fail(p.pos, "unexpected %s, expected ',' or ']' after an array element", p.describe())
	}
}

// lineIndex converts byte offsets to positions in O(log n), so reporting the
// line of each of 10,000 stories does not rescan the file each time.
type lineIndex struct {
	data   []byte
	starts []int
}

func newLineIndex(data []byte) *lineIndex {
	return &lineIndex{data: data, starts: lineStarts(data, 0)}
}

// pos returns the 1-based line and character column of a byte offset.
func (li *lineIndex) pos(off int) position {
	off = min(max(off, 0), len(li.data))
	line := sort.Search(len(li.starts), func(i int) bool { return li.starts[i] > off })
	start := li.starts[line-1]
	return position{line: line, col: utf8.RuneCount(li.data[start:off]) + 1}
}

// lineStartOf returns the offset where the line holding off starts.
func (li *lineIndex) lineStartOf(off int) int {
	return li.starts[li.pos(off).line-1]
}

// jsonString encodes s as a JSON string without HTML escaping, which is also
// a valid YAML double-quoted scalar.
func jsonString(s string) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s) // encoding a string cannot fail
	return string(bytes.TrimSuffix(b.Bytes(), []byte("\n")))
}

// parseJSONText parses a complete JSON text (RFC 8259; a leading byte
// order mark is tolerated) and rejects duplicate keys, which would make an
// edit ambiguous. Errors are *jsonSyntaxError. The strings of the result
// share one copy of data, so 10,000 stories do not cost 100,000
// allocations; that copy is returned too, so callers can slice more text
// from it for free.
func parseJSONText(data []byte, lines *lineIndex) (*jvalue, string, error) {
	p := &jparser{data: data, text: string(data), lines: lines}
	v, err := p.parse()
	return v, p.text, err
}
