package inputlimit

// CheckYAML refuses YAML larger than MaxBytes or nested deeper than
// MaxDepth. It counts both ways YAML nests: flow collections ([a, [b]],
// {a: {b: c}}) and block collections, whether each level is indented on
// a line of its own or written compactly as "- - - x" or "? ? x". Brackets
// inside quoted scalars, block scalars (| and >) and comments do not count,
// and neither do brackets inside a plain scalar in block context, such as
// "title: a[0]", because they do not nest there.
//
// It is a scanner, not a parser: it errs on the side of counting, and
// leaves the syntax to the parser.
func CheckYAML(name string, data []byte) error {
	if err := CheckSize(name, data); err != nil {
		return err
	}
	s := yamlScanner{name: name, blockScalar: -1}
	lineNo := 0
	for start := 0; start < len(data); {
		end := start
		for end < len(data) && data[end] != '\n' {
			end++
		}
		lineNo++
		if err := s.line(data[start:end], lineNo); err != nil {
			return err
		}
		start = end + 1
	}
	return nil
}

// yamlScanner carries what spans lines: the open block levels, the open
// flow collections, a quoted scalar or block scalar still running.
type yamlScanner struct {
	name string
	// block holds the columns of the open block collections, outermost
	// first; each is deeper than the one before.
	block []int
	// flow is the number of open flow collections.
	flow int
	// quote is the quote character of a quoted scalar still open at the
	// end of the previous line, or 0.
	quote byte
	// blockScalar is the indentation of the line that started a block
	// scalar whose content lines are still running, or -1.
	blockScalar int
}

func isBlank(c byte) bool { return c == ' ' || c == '\t' || c == '\r' }

// line scans one line, without its "\n".
func (s *yamlScanner) line(line []byte, no int) error {
	indent := 0
	for indent < len(line) && (line[indent] == ' ' || line[indent] == '\t') {
		indent++
	}
	empty := indent == len(line) || (indent == len(line)-1 && line[indent] == '\r')
	if s.blockScalar >= 0 {
		if empty || indent > s.blockScalar {
			return nil // content of a block scalar: text, not structure
		}
		s.blockScalar = -1
	}

	i := 0
	nodeStart := true // at a place where a new node may begin
	if s.quote == 0 && s.flow == 0 {
		if empty || line[indent] == '#' || line[indent] == '%' {
			return nil
		}
		// The line's indentation closes the block levels at or right of
		// it and opens one of its own.
		for len(s.block) > 0 && s.block[len(s.block)-1] >= indent {
			s.block = s.block[:len(s.block)-1]
		}
		if err := s.openBlock(indent, no); err != nil {
			return err
		}
		i = indent
		if indent == 0 && len(line) >= 3 && (string(line[:3]) == "---" || string(line[:3]) == "...") && (len(line) == 3 || isBlank(line[3])) {
			i = 3 // a document marker; a node may follow it
		}
	}

	for i < len(line) {
		c := line[i]
		if s.quote != 0 {
			i = s.skipQuoted(line, i)
			nodeStart = false
			continue
		}
		if isBlank(c) {
			i++
			continue
		}
		if c == '#' && (i == 0 || isBlank(line[i-1])) {
			return nil // a comment runs to the end of the line
		}
		if s.flow > 0 {
			switch c {
			case '[', '{':
				if s.flow++; s.depth() > MaxDepth {
					return tooDeep(s.name, no)
				}
				nodeStart = true
			case ']', '}':
				s.flow--
				nodeStart = false
			case ',', '?', ':':
				nodeStart = true
			case '"', '\'':
				if nodeStart {
					s.quote = c
				}
				nodeStart = false
			default:
				nodeStart = false
			}
			i++
			continue
		}

		// Block context.
		next := byte(' ')
		if i+1 < len(line) {
			next = line[i+1]
		}
		switch {
		case nodeStart && (c == '-' || c == '?' || c == ':') && isBlank(next):
			// "- ", "? " and ": " at a node's start open a compact
			// collection inside the current one, at the column where its
			// content starts, which is where its next lines are indented.
			i++
			for i < len(line) && isBlank(line[i]) {
				i++
			}
			if err := s.openBlock(i, no); err != nil {
				return err
			}
		case nodeStart && (c == '[' || c == '{'):
			if s.flow++; s.depth() > MaxDepth {
				return tooDeep(s.name, no)
			}
			i++
		case nodeStart && (c == '"' || c == '\''):
			s.quote = c
			i++
		case nodeStart && (c == '|' || c == '>') && blockScalarHeader(line[i+1:]):
			// A block scalar: the lines indented deeper than this one
			// are its text.
			s.blockScalar = indent
			return nil
		case nodeStart && (c == '&' || c == '!'):
			// An anchor or a tag comes before the node it names.
			for i < len(line) && !isBlank(line[i]) {
				i++
			}
		case c == ':' && isBlank(next):
			// The value of a key on this line comes next.
			nodeStart = true
			i++
		default:
			nodeStart = false
			i++
		}
	}
	return nil
}

// openBlock opens a block level at column col, unless one is open there.
func (s *yamlScanner) openBlock(col, no int) error {
	if n := len(s.block); n > 0 && s.block[n-1] >= col {
		return nil
	}
	s.block = append(s.block, col)
	if s.depth() > MaxDepth {
		return tooDeep(s.name, no)
	}
	return nil
}

func (s *yamlScanner) depth() int { return len(s.block) + s.flow }

// skipQuoted moves past the open quoted scalar from line[i], returning the
// offset after its closing quote, or the line's length when it continues
// on the next line.
func (s *yamlScanner) skipQuoted(line []byte, i int) int {
	for ; i < len(line); i++ {
		switch c := line[i]; {
		case c == '\\' && s.quote == '"':
			i++
		case c == '\'' && s.quote == '\'' && i+1 < len(line) && line[i+1] == '\'':
			i++ // '' is an escaped quote inside a single-quoted scalar
		case c == s.quote:
			s.quote = 0
			return i + 1
		}
	}
	return i
}

// blockScalarHeader reports whether rest, what follows a "|" or ">", is the
// rest of a block scalar header: indentation and chomping indicators, then
// nothing but blanks or a comment.
func blockScalarHeader(rest []byte) bool {
	i := 0
	for i < len(rest) && (rest[i] == '+' || rest[i] == '-' || ('0' <= rest[i] && rest[i] <= '9')) {
		i++
	}
	for i < len(rest) && isBlank(rest[i]) {
		i++
	}
	return i == len(rest) || (rest[i] == '#' && i > 0 && isBlank(rest[i-1]))
}
