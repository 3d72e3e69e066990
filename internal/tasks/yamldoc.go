package tasks

import (
	"bytes"
	"errors"
	"fmt"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/parser"
	"github.com/goccy/go-yaml/token"

	"github.com/ralphloop/ralph/internal/inputlimit"
)

// yamlDoc is a parsed YAML file together with what surgical edits need: the
// original bytes and a normalised copy with line tables for both.
//
// goccy/go-yaml miscounts lines after a comment in CRLF files and reads a
// byte order mark as part of the first key, so the parser sees the file with
// the mark removed and CRLF turned into LF. Only line endings differ between
// the two copies, so a (line, column) found in the normalised text is the
// same place in the original, and edits computed against the normalised
// text are mapped back onto the original bytes, which keeps the file's own
// line endings everywhere ralph does not write.
type yamlDoc struct {
	path      string
	orig      []byte // the file as read
	norm      []byte // orig without byte order mark, CRLF as LF
	normLines []int  // normLines[i] is where line i+1 starts in norm
	origLines []int  // origLines[i] is where line i+1 starts in orig
	eol       string // line ending for new lines: the file's own
	body      ast.Node
}

// yamlErrorHint is what every YAML syntax error tells the user to do.
const yamlErrorHint = "fix the YAML syntax; ralph only edits a progress file it can parse"

// parseYAMLDoc parses data, which must hold at most one YAML document. An
// empty document yields a nil body.
func parseYAMLDoc(path string, data []byte) (*yamlDoc, error) {
	// goccy/go-yaml needs memory that grows with the square of the nesting
	// depth, so a deeply nested file is refused before it gets there.
	if err := inputlimit.CheckYAML(displayName(path, "progress file"), data); err != nil {
		return nil, err
	}
	if !utf8.Valid(data) {
		e := invalidUTF8Error(path, data)
		e.Hint = "save the file as UTF-8 text"
		return nil, e
	}
	d := &yamlDoc{path: path, orig: data, eol: eolOf(data)}
	bom := 0
	if bytes.HasPrefix(data, []byte(byteOrderMark)) {
		bom = len(byteOrderMark)
	}
	d.norm = bytes.ReplaceAll(data[bom:], []byte("\r\n"), []byte("\n"))
	if at := bytes.IndexByte(d.norm, '\r'); at >= 0 {
		// YAML reads a lone CR as a line break, but the line tables that
		// map edits back onto the file count only LF, so an edit would
		// land on the wrong line.
		return nil, &ParseError{Path: path, Line: 1 + bytes.Count(d.norm[:at], []byte("\n")),
			Msg:  "a carriage return (CR) that is not followed by a line feed",
			Hint: "save the file with LF or CRLF line endings"}
	}
	d.normLines = lineStarts(d.norm, 0)
	d.origLines = lineStarts(data[bom:], bom)

	file, err := parser.ParseBytes(d.norm, 0)
	if err != nil {
		return nil, d.syntaxError(err)
	}
	for _, doc := range file.Docs {
		if doc == nil || doc.Body == nil {
			continue
		}
		if d.body != nil {
			at := d.pos(doc.Body.GetToken())
			return nil, &ParseError{Path: path, Line: at.line, Column: at.col,
				Msg:  "a second YAML document starts here",
				Hint: `keep the whole file one document: remove the "---" separator`}
		}
		d.body = doc.Body
	}
	return d, nil
}

// lineStarts returns the offset of every line start in data, plus base.
func lineStarts(data []byte, base int) []int {
	starts := make([]int, 1, bytes.Count(data, []byte{'\n'})+1)
	starts[0] = base
	for i, c := range data {
		if c == '\n' {
			starts = append(starts, base+i+1)
		}
	}
	return starts
}

// yamlError is what goccy/go-yaml's errors provide besides Error.
type yamlError interface {
	GetToken() *token.Token
	GetMessage() string
}

func (d *yamlDoc) syntaxError(err error) error {
	var ye yamlError
	if errors.As(err, &ye) && ye.GetToken() != nil {
		at := d.pos(ye.GetToken())
		return &ParseError{Path: d.path, Line: at.line, Column: at.col,
			Msg: "invalid YAML: " + ye.GetMessage(), Hint: yamlErrorHint}
	}
	return &ParseError{Path: d.path, Msg: "invalid YAML: " + err.Error(), Hint: yamlErrorHint}
}

// pos is where a token is, for error messages.
func (d *yamlDoc) pos(tok *token.Token) position {
	if tok == nil || tok.Position == nil {
		return position{}
	}
	return position{line: tok.Position.Line, col: max(tok.Position.Column, 1)}
}

// nodePos is where a node starts for error messages: a mapping entry is
// reported at its key, other nodes at their first token.
func (d *yamlDoc) nodePos(n ast.Node) position {
	switch n := n.(type) {
	case nil:
		return position{}
	case *ast.MappingValueNode:
		return d.pos(n.Key.GetToken())
	case *ast.MappingNode:
		if !n.IsFlowStyle && len(n.Values) > 0 {
			return d.pos(n.Values[0].Key.GetToken())
		}
	}
	return d.pos(n.GetToken())
}

// errAt builds a *ParseError pointing at node n.
func (d *yamlDoc) errAt(n ast.Node, hint, format string, args ...any) *ParseError {
	at := d.nodePos(n)
	return &ParseError{Path: d.path, Line: at.line, Column: at.col, Msg: fmt.Sprintf(format, args...), Hint: hint}
}

// lineStart is where line (1-based) starts in norm; a line past the end
// starts at the end of the text.
func (d *yamlDoc) lineStart(line int) int {
	if line > len(d.normLines) {
		return len(d.norm)
	}
	return d.normLines[max(line, 1)-1]
}

// lineEnd is the offset of the newline ending line, or the end of the text.
func (d *yamlDoc) lineEnd(line int) int {
	if line >= len(d.normLines) {
		return len(d.norm)
	}
	return d.normLines[line] - 1
}

// offset converts a token position (1-based line, column in characters)
// into an offset in norm.
func (d *yamlDoc) offset(p *token.Position) int {
	off, end := d.lineStart(p.Line), d.lineEnd(p.Line)
	for c := 1; c < p.Column && off < end; c++ {
		_, size := utf8.DecodeRune(d.norm[off:end])
		off += size
	}
	return off
}

// skipBlanks moves off past spaces and tabs, because goccy sometimes places
// a token at the blank before it (after a tab, for instance).
func (d *yamlDoc) skipBlanks(off int) int {
	for off < len(d.norm) && (d.norm[off] == ' ' || d.norm[off] == '\t') {
		off++
	}
	return off
}

// tokenStart is where a token's text starts in norm.
func (d *yamlDoc) tokenStart(tok *token.Token) int { return d.skipBlanks(d.offset(tok.Position)) }

// toOrig maps an offset in norm onto the original bytes. An offset at the
// end of a line maps to just before that line's ending, CR included.
func (d *yamlDoc) toOrig(off int) int {
	line := d.lineOf(off) - 1
	return d.origLines[line] + off - d.normLines[line]
}

// origSlice returns the original bytes between two offsets in norm.
func (d *yamlDoc) origSlice(start, end int) string {
	return string(d.orig[d.toOrig(start):d.toOrig(end)])
}

// render applies edits computed against norm to the original bytes: offsets
// are mapped back and the new text gets the file's line endings.
func (d *yamlDoc) render(edits []edit) ([]byte, error) {
	mapped := make([]edit, len(edits))
	for i, e := range edits {
		text := e.text
		if d.eol != "\n" {
			text = strings.ReplaceAll(text, "\n", d.eol)
		}
		mapped[i] = edit{start: d.toOrig(e.start), end: d.toOrig(e.end), text: text}
	}
	return applyEdits(d.orig, mapped)
}

// lastLine is the last line a node's text occupies, comments excluded.
func lastLine(n ast.Node) int {
	switch n := n.(type) {
	case nil:
		return 0
	case *ast.LiteralNode:
		// The content token of a block scalar is placed inconsistently
		// (first line for "|", last line for ">"), but it always starts on
		// the line after the indicator and its text spans whole lines. Its
		// text also carries the blank lines after it and the indentation
		// of the next line, which are not part of the value.
		content := ""
		if n.Value != nil && n.Value.Token != nil {
			content = strings.TrimRight(n.Value.Token.Origin, " \t\n")
		}
		if strings.TrimSpace(content) == "" {
			return n.Start.Position.Line
		}
		return n.Start.Position.Line + 1 + strings.Count(content, "\n")
	case *ast.MappingNode:
		return collectionLastLine(n.Start, n.End, n.IsFlowStyle, n.Values)
	case *ast.SequenceNode:
		return collectionLastLine(n.Start, n.End, n.IsFlowStyle, n.Values)
	case *ast.MappingValueNode:
		return max(lastLine(n.Key), lastLine(n.Value))
	case *ast.MappingKeyNode:
		return max(tokenLastLine(n.Start), lastLine(n.Value))
	case *ast.TagNode:
		return max(tokenLastLine(n.Start), lastLine(n.Value))
	case *ast.AnchorNode:
		return max(tokenLastLine(n.Start), lastLine(n.Name), lastLine(n.Value))
	case *ast.AliasNode:
		return max(tokenLastLine(n.Start), lastLine(n.Value))
	}
	return tokenLastLine(n.GetToken())
}

// collectionLastLine is lastLine of a mapping or a sequence: its last
// value's, or its closing bracket's in flow style.
func collectionLastLine[N ast.Node](start, end *token.Token, flow bool, values []N) int {
	last := tokenLastLine(start)
	for _, v := range values {
		last = max(last, lastLine(v))
	}
	if flow {
		last = max(last, tokenLastLine(end))
	}
	return last
}

// tokenLastLine is the last line of a token's text: its own line plus the
// line breaks inside it (a multi-line plain or quoted scalar).
func tokenLastLine(tok *token.Token) int {
	if tok == nil || tok.Position == nil {
		return 0
	}
	return tok.Position.Line + strings.Count(strings.TrimSpace(tok.Origin), "\n")
}

// unwrapAnchor returns the anchored value, so "&a value" reads as "value".
func unwrapAnchor(n ast.Node) ast.Node {
	for {
		a, ok := n.(*ast.AnchorNode)
		if !ok {
			return n
		}
		n = a.Value
	}
}

// scalarText returns a scalar's text as written (numbers and booleans in
// their source spelling, so an id like 1.10 stays "1.10"), whether it is
// null, and whether n is a scalar at all. Anchors and tags are looked
// through for reading.
func scalarText(n ast.Node) (text string, null, ok bool) {
	n = unwrapAnchor(n)
	if t, isTag := n.(*ast.TagNode); isTag {
		n = unwrapAnchor(t.Value)
	}
	switch n := n.(type) {
	case nil:
		return "", true, true
	case *ast.NullNode:
		return "", true, true
	case *ast.StringNode:
		return n.Value, false, true
	case *ast.LiteralNode:
		if n.Value == nil {
			return "", false, true
		}
		return n.Value.Value, false, true
	case *ast.IntegerNode, *ast.FloatNode, *ast.BoolNode, *ast.InfinityNode, *ast.NanNode:
		return n.GetToken().Value, false, true
	}
	return "", false, false
}

// ymap is a YAML mapping as the editor sees it: its entries, their keys and
// whether it is written in flow style ({a: 1}).
type ymap struct {
	node    ast.Node
	flow    bool
	end     *token.Token // the closing brace of a flow mapping
	entries []*ast.MappingValueNode
	keys    []string
}

// asMap returns n as a mapping. Anchors are looked through; merge keys and
// complex keys are rejected because an edit could not tell which mapping
// really holds a key.
func (d *yamlDoc) asMap(n ast.Node) (*ymap, bool, error) {
	n = unwrapAnchor(n)
	m := &ymap{node: n}
	switch n := n.(type) {
	case *ast.MappingNode:
		m.flow, m.end, m.entries = n.IsFlowStyle, n.End, n.Values
	case *ast.MappingValueNode:
		m.entries = []*ast.MappingValueNode{n}
	default:
		return nil, false, nil
	}
	m.keys = make([]string, len(m.entries))
	for i, e := range m.entries {
		if _, merge := e.Key.(*ast.MergeKeyNode); merge {
			return nil, true, d.errAt(e, "write the keys out instead of merging them", "merge keys (<<) are not supported here")
		}
		key, null, ok := scalarText(e.Key)
		if !ok || null {
			return nil, true, d.errAt(e, "use plain text keys", "unsupported mapping key")
		}
		m.keys[i] = key
	}
	return m, true, nil
}

// index returns the position of key among the entries, or -1.
func (m *ymap) index(key string) int {
	for i, k := range m.keys {
		if k == key {
			return i
		}
	}
	return -1
}

// get returns the entry for key, or nil.
func (m *ymap) get(key string) *ast.MappingValueNode {
	if i := m.index(key); i >= 0 {
		return m.entries[i]
	}
	return nil
}

// keyStart is where an entry's key starts in norm.
func (d *yamlDoc) keyStart(e *ast.MappingValueNode) int { return d.tokenStart(e.Key.GetToken()) }

// startsLine reports whether only blanks precede off on its line, that is
// the key at off is not behind a "- " sequence marker.
func (d *yamlDoc) startsLine(off int) bool {
	for i := off - 1; i >= 0 && d.norm[i] != '\n'; i-- {
		if d.norm[i] != ' ' && d.norm[i] != '\t' {
			return false
		}
	}
	return true
}

// valueSpan returns where an entry's value is written in norm. implicit is
// true when the value is empty ("key:" alone), in which case start == end is
// just after the colon. A block collection spans from its first token to the
// end of its last line.
func (d *yamlDoc) valueSpan(e *ast.MappingValueNode) (start, end int, implicit bool, err error) {
	colon := d.offset(e.Start.Position)
	if colon >= len(d.norm) || d.norm[colon] != ':' {
		// A key without a colon ({id: 1, done}) has no place for a value
		// that an edit could replace or cut.
		return 0, 0, false, d.errAt(e, fmt.Sprintf("write it as %q", keyOf(e)+": null"), "%q has no colon and value", keyOf(e))
	}
	switch v := e.Value.(type) {
	case *ast.TagNode, *ast.AnchorNode, *ast.AliasNode:
		return 0, 0, false, d.errAt(e, "write a plain value so ralph can update it", "the value of %q uses a YAML tag, anchor or alias", keyOf(e))
	case *ast.LiteralNode:
		start = d.tokenStart(v.Start)
		if line := lastLine(v); line > v.Start.Position.Line {
			return start, d.lineEnd(line), false, nil
		}
		return start, start + len(strings.TrimSpace(v.Start.Origin)), false, nil
	case *ast.MappingNode:
		if v.IsFlowStyle {
			return d.tokenStart(v.Start), d.offset(v.End.Position) + 1, false, nil
		}
		return d.keyStart(v.Values[0]), d.lineEnd(lastLine(v)), false, nil
	case *ast.MappingValueNode:
		return d.keyStart(v), d.lineEnd(lastLine(v)), false, nil
	case *ast.SequenceNode:
		if v.IsFlowStyle {
			return d.tokenStart(v.Start), d.offset(v.End.Position) + 1, false, nil
		}
		return d.tokenStart(v.Start), d.lineEnd(lastLine(v)), false, nil
	case nil:
		return colon + 1, colon + 1, true, nil
	}
	tok := e.Value.GetToken()
	raw := strings.TrimSpace(tok.Origin)
	start = d.tokenStart(tok)
	if raw != "" && bytes.HasPrefix(d.norm[start:], []byte(raw)) {
		return start, start + len(raw), false, nil
	}
	if _, null := e.Value.(*ast.NullNode); null {
		// goccy gives an empty value a made-up "null" token; nothing is
		// written in the file.
		return colon + 1, colon + 1, true, nil
	}
	return 0, 0, false, d.errAt(e, "write the value on one line", "cannot locate the value of %q in the file", keyOf(e))
}

func keyOf(e *ast.MappingValueNode) string {
	k, _, _ := scalarText(e.Key)
	return k
}

// indentOf is the indentation of a block mapping's keys, from its first key.
func (d *yamlDoc) indentOf(m *ymap) string {
	off := d.keyStart(m.entries[0])
	return strings.Repeat(" ", utf8.RuneCount(d.norm[d.lineStart(d.lineOf(off)):off]))
}

// lineOf returns the 1-based line holding offset off of norm.
func (d *yamlDoc) lineOf(off int) int {
	return sort.Search(len(d.normLines), func(i int) bool { return d.normLines[i] > off })
}

// yval is a value to write: an inline text (a scalar or flow collection),
// or, when isList is set, a sequence of already formatted scalars, written
// as a block list in block mappings and as [a, b] in flow mappings.
type yval struct {
	inline string
	list   []string
	isList bool
}

func inlineVal(s string) yval     { return yval{inline: s} }
func listVal(items []string) yval { return yval{list: items, isList: true} }

// flowText renders the value for a flow context.
func (v yval) flowText() string {
	if !v.isList {
		return v.inline
	}
	return "[" + strings.Join(v.list, ", ") + "]"
}

// blockText renders the value after "key:" in a block mapping whose keys are
// indented by indent; lists go on the following lines, two spaces deeper.
func (v yval) blockText(indent string) string {
	if !v.isList {
		return " " + v.inline
	}
	if len(v.list) == 0 {
		return " []"
	}
	var b strings.Builder
	for _, item := range v.list {
		b.WriteString("\n" + indent + "  - " + item)
	}
	return b.String()
}

// yamlEditor collects edits against one yamlDoc.
type yamlEditor struct {
	d     *yamlDoc
	edits []edit
}

func (ed *yamlEditor) add(start, end int, text string) {
	ed.edits = append(ed.edits, edit{start: start, end: end, text: text})
}

// setValue replaces an existing entry's value, keeping the key, the spacing
// after the colon and any comment after the value.
func (ed *yamlEditor) setValue(m *ymap, e *ast.MappingValueNode, v yval) error {
	d := ed.d
	start, end, implicit, err := d.valueSpan(e)
	if err != nil {
		return err
	}
	colon := d.offset(e.Start.Position)
	switch {
	case m.flow:
		if implicit {
			ed.add(start, end, " "+v.flowText())
		} else {
			ed.add(start, end, v.flowText())
		}
	case v.isList && len(v.list) > 0:
		// A block list starts on the line after the key, whatever was there.
		ed.add(colon+1, end, v.blockText(d.indentOf(m)))
	case implicit || isBlockCollection(e.Value):
		ed.add(colon+1, end, v.blockText(d.indentOf(m)))
	default:
		ed.addKeepingCommentColumn(start, end, v.flowText())
	}
	return nil
}

// addKeepingCommentColumn replaces norm[start:end] with text and, when a
// comment follows on the same line after blanks, widens or narrows those
// blanks (keeping at least one) so the comment stays in its column, since
// aligned comments are formatting a human chose.
func (ed *yamlEditor) addKeepingCommentColumn(start, end int, text string) {
	d := ed.d
	if strings.Contains(text, "\n") || bytes.IndexByte(d.norm[start:end], '\n') >= 0 {
		ed.add(start, end, text)
		return
	}
	blanks := d.skipBlanks(end) - end
	if blanks == 0 || end+blanks >= len(d.norm) || d.norm[end+blanks] != '#' {
		ed.add(start, end, text)
		return
	}
	shift := utf8.RuneCount(d.norm[start:end]) - utf8.RuneCountInString(text)
	if d.norm[end] == '\t' || shift == 0 {
		ed.add(start, end, text)
		return
	}
	newBlanks := max(blanks+shift, 1)
	ed.add(start, end+blanks, text+strings.Repeat(" ", newBlanks))
}

func isBlockCollection(n ast.Node) bool {
	switch n := n.(type) {
	case *ast.MappingNode:
		return !n.IsFlowStyle
	case *ast.MappingValueNode:
		return true
	case *ast.SequenceNode:
		return !n.IsFlowStyle
	}
	return false
}

// insertAfter adds "key: value" as a new entry right after entry i, or at the
// end of the mapping when i is -1. In a block mapping it is a new line with
// the mapping's indentation; in a flow mapping it goes before the "}".
func (ed *yamlEditor) insertAfter(m *ymap, i int, key string, v yval) {
	d := ed.d
	if m.flow {
		text := key + ": " + v.flowText()
		if len(m.entries) > 0 {
			text = ", " + text
		}
		ed.add(d.offset(m.end.Position), d.offset(m.end.Position), text)
		return
	}
	if i < 0 {
		i = len(m.entries) - 1
	}
	indent := d.indentOf(m)
	text := indent + key + ":" + v.blockText(indent) + "\n"
	at := d.lineStart(lastLine(m.entries[i]) + 1)
	if at == len(d.norm) && (at == 0 || d.norm[at-1] != '\n') {
		text = "\n" + strings.TrimSuffix(text, "\n")
	}
	ed.add(at, at, text)
}

// insertBefore adds "key: value" as a new line just above entry i of a block
// mapping whose key starts its line, falling back to insertAfter otherwise.
func (ed *yamlEditor) insertBefore(m *ymap, i int, key string, v yval) {
	d := ed.d
	if m.flow || !d.startsLine(d.keyStart(m.entries[i])) {
		ed.insertAfter(m, -1, key, v)
		return
	}
	indent := d.indentOf(m)
	at := d.lineStart(m.entries[i].Key.GetToken().Position.Line)
	ed.add(at, at, indent+key+":"+v.blockText(indent)+"\n")
}

// remove deletes entry i with its value and any comment on its lines. A key
// that starts its line goes with its whole lines; the first key of a "- "
// list item is cut up to the next key, which moves up behind the marker.
func (ed *yamlEditor) remove(m *ymap, i int) error {
	d := ed.d
	e := m.entries[i]
	start := d.keyStart(e)
	switch {
	case m.flow:
		_, vEnd, _, err := d.valueSpan(e)
		if err != nil {
			return err
		}
		switch {
		case i+1 < len(m.entries):
			ed.add(start, d.keyStart(m.entries[i+1]), "")
		case i > 0:
			_, prevEnd, _, err := d.valueSpan(m.entries[i-1])
			if err != nil {
				return err
			}
			ed.add(prevEnd, vEnd, "")
		default:
			ed.add(start, vEnd, "")
		}
	case d.startsLine(start):
		ed.add(d.lineStart(e.Key.GetToken().Position.Line), d.lineStart(lastLine(e)+1), "")
	case i+1 < len(m.entries):
		ed.add(start, d.keyStart(m.entries[i+1]), "")
	default:
		return d.errAt(e, "give the item another key first", "cannot remove %q: it is the only key of its list item", keyOf(e))
	}
	return nil
}

// yamlString formats s as a YAML scalar that reads back as the string s:
// plain when that is unambiguous, double-quoted otherwise. Anything that
// could read as a number, boolean, null, date or YAML syntax is quoted, so
// an id like 1.1 stays text.
func yamlString(s string) string {
	if plainSafe(s) {
		return s
	}
	return jsonString(s)
}

// plainSafe is deliberately conservative: a false "no" only costs quotes.
func plainSafe(s string) bool {
	if s == "" || s != strings.TrimSpace(s) {
		return false
	}
	switch c := s[0]; {
	case c >= '0' && c <= '9', strings.IndexByte("-+.?:,[]{}#&*!|>'\"%@`~=", c) >= 0:
		return false
	}
	switch strings.ToLower(s) {
	case "null", "true", "false", "yes", "no", "on", "off", "y", "n":
		return false
	}
	if strings.Contains(s, ": ") || strings.Contains(s, " #") || strings.HasSuffix(s, ":") {
		return false
	}
	for _, r := range s {
		if r < ' ' || r == 0x7f || r == '\u2028' || r == '\u2029' || r == '\ufeff' {
			return false
		}
	}
	return true
}
