// Package inputlimit refuses input that would cost a parser far more time or
// memory than its size suggests, before the parser sees it.
//
// Every file a user or an agent can write (the task files, the config, the
// state ralph reads back) goes through one of these checks first. Parsers
// such as goccy/go-yaml and BurntSushi/toml need memory that grows with the
// square of the nesting depth or key length: 200 KB of "[[[[" made the YAML
// parser take 15 GB and 40 s before it gave up. Real files are a few levels
// deep and a few megabytes at most, so a file beyond MaxDepth or MaxBytes is
// taken for a corrupted one and refused in milliseconds, with the line where
// it went too deep.
package inputlimit

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"syscall"
)

// MaxDepth is the deepest nesting of lists and mappings accepted. Task files
// and state nest fewer than ten levels.
const MaxDepth = 100

// MaxBytes is the largest input accepted: ten times a PRD of 10,000 stories.
const MaxBytes = 16 << 20

// Error says why an input was refused.
type Error struct {
	// Name is the file (or what the input is) as the user knows it.
	Name string
	// Line is the 1-based line where the input went too deep, or 0 when
	// it is too large.
	Line int
	// Msg states the limit that was exceeded.
	Msg string
	// Hint says what to do; callers whose input is not a file the user
	// keeps, such as an agent's reply, put their own advice here.
	Hint string
}

// fileHint is what to do about a refused file.
const fileHint = "is the file corrupted? restore it (from git, for example) or fix it by hand"

func (e *Error) Error() string {
	at := ""
	if e.Line > 0 {
		at = fmt.Sprintf(" at line %d", e.Line)
	}
	return fmt.Sprintf("%s: %s%s: ralph refuses it; %s", e.Name, e.Msg, at, e.Hint)
}

func tooDeep(name string, line int) error {
	return &Error{Name: name, Line: line, Msg: fmt.Sprintf("nesting deeper than %d levels", MaxDepth), Hint: fileHint}
}

// CheckSize refuses data larger than MaxBytes. It is all a format without
// nesting, such as markdown, needs.
func CheckSize(name string, data []byte) error {
	if len(data) > MaxBytes {
		return tooLarge(name, int64(len(data)))
	}
	return nil
}

func tooLarge(name string, size int64) error {
	return &Error{Name: name, Msg: fmt.Sprintf("%s is larger than the %s ralph reads", megabytes(size), megabytes(MaxBytes)), Hint: fileHint}
}

func megabytes(n int64) string {
	return fmt.Sprintf("%.1f MB", float64(n)/(1<<20))
}

// ReadFile reads the file at path like os.ReadFile, but refuses one larger
// than MaxBytes without reading it all, so that a huge file cannot exhaust
// memory, and anything but a regular file (see Open). Errors from the file
// system are returned as os.ReadFile returns them, so
// errors.Is(err, fs.ErrNotExist) still works.
func ReadFile(path string) ([]byte, error) {
	f, err := Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if info, err := f.Stat(); err == nil && info.Size() > MaxBytes {
		return nil, tooLarge(path, info.Size())
	}
	data, err := io.ReadAll(io.LimitReader(f, MaxBytes+1))
	if err != nil {
		return nil, &os.PathError{Op: "read", Path: path, Err: err}
	}
	if len(data) > MaxBytes {
		return nil, &Error{Name: path, Msg: fmt.Sprintf("more than %s of data", megabytes(MaxBytes)), Hint: fileHint}
	}
	return data, nil
}

// Open opens the file at path for reading like os.Open, but refuses
// anything that is not a regular file (a symbolic link to one is fine): a
// named pipe (FIFO) put in place of the PRD, the config or a prompt would
// block the read, or the open itself, forever, with ralph's lock held and
// SIGTERM waiting; a device never ends (/dev/zero) or blocks; a directory
// cannot be read. It opens with O_NONBLOCK, so that opening a FIFO without
// a writer returns at once, and checks what it opened, so that nothing
// swapped in between the check and the open gets through.
func Open(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	info, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if !info.Mode().IsRegular() {
		f.Close()
		return nil, NotRegular(path, info.Mode())
	}
	return f, nil
}

// NotRegular is the refusal of path, which is not a regular file but m:
// what it is, and what to do.
func NotRegular(path string, m fs.FileMode) error {
	what := "not a regular file"
	switch {
	case m&fs.ModeNamedPipe != 0:
		what = "a named pipe (FIFO), not a regular file"
	case m&fs.ModeSocket != 0:
		what = "a socket, not a regular file"
	case m&fs.ModeDevice != 0:
		what = "a device, not a regular file"
	case m.IsDir():
		what = "a folder, not a file"
	}
	return &Error{Name: path, Msg: "it is " + what, Hint: "reading it could wait forever or never end: put a regular file there (restore it from git, for example)"}
}

// IsRefusal reports whether err is a refusal by this package.
func IsRefusal(err error) bool {
	var e *Error
	return errors.As(err, &e)
}

// CheckJSON refuses JSON larger than MaxBytes or with arrays and objects
// nested deeper than MaxDepth. Brackets inside strings do not count. It
// does not validate the syntax; the parser does that afterwards.
func CheckJSON(name string, data []byte) error {
	if err := CheckSize(name, data); err != nil {
		return err
	}
	depth, line := 0, 1
	inString := false
	for i := 0; i < len(data); i++ {
		c := data[i]
		switch {
		case c == '\n':
			line++
		case inString:
			switch c {
			case '\\':
				i++ // the escaped character cannot end the string
			case '"':
				inString = false
			}
		case c == '"':
			inString = true
		case c == '[' || c == '{':
			if depth++; depth > MaxDepth {
				return tooDeep(name, line)
			}
		case c == ']' || c == '}':
			depth = max(depth-1, 0)
		}
	}
	return nil
}

// CheckTOML refuses TOML larger than MaxBytes or nested deeper than
// MaxDepth. Arrays, inline tables and the parts of a dotted key
// (a.b.c = 1, [a.b.c]) all count as levels, since each one is a level of
// the tables the parser builds; strings and comments do not count.
func CheckTOML(name string, data []byte) error {
	if err := CheckSize(name, data); err != nil {
		return err
	}
	var (
		line     = 1
		brackets []byte // the open '[' and '{', innermost last
		keyParts int    // dots so far in the key being read
		inKey    = true // at a key rather than a value
	)
	for i := 0; i < len(data); i++ {
		c := data[i]
		switch c {
		case '\n':
			line++
			// A new line starts a key unless a value (an array, or a
			// multi-line inline table in TOML 1.1) is still open.
			if len(brackets) == 0 || brackets[len(brackets)-1] == '{' {
				inKey, keyParts = len(brackets) == 0, 0
			}
		case '#':
			for i+1 < len(data) && data[i+1] != '\n' {
				i++
			}
		case '"', '\'':
			end, lines := tomlStringEnd(data, i)
			i, line = end, line+lines
		case '=':
			inKey, keyParts = false, 0
		case '.':
			if inKey {
				if keyParts++; len(brackets)+keyParts > MaxDepth {
					return tooDeep(name, line)
				}
			}
		case '[', '{':
			brackets = append(brackets, c)
			if len(brackets)+keyParts > MaxDepth {
				return tooDeep(name, line)
			}
			// A table header's name and an inline table's first key are
			// keys; an array holds values.
			inKey = c == '{' || (len(brackets) <= 2 && inKey)
			if c == '{' {
				keyParts = 0
			}
		case ']', '}':
			if n := len(brackets); n > 0 {
				brackets = brackets[:n-1]
			}
			if c == ']' {
				inKey = false
			}
		case ',':
			if n := len(brackets); n > 0 && brackets[n-1] == '{' {
				inKey, keyParts = true, 0
			}
		}
	}
	return nil
}

// tomlStringEnd returns the offset of the last byte of the string that
// opens at data[i] ("...", '...', """...""" or ”'...”') and the number of
// line breaks inside it. An unterminated string runs to the end of its line
// (or of the data for a multi-line one); the parser reports it.
func tomlStringEnd(data []byte, i int) (end, lines int) {
	q := data[i]
	multi := i+2 < len(data) && data[i+1] == q && data[i+2] == q
	j := i + 1
	if multi {
		j = i + 3
	}
	for ; j < len(data); j++ {
		c := data[j]
		switch {
		case c == '\\' && q == '"':
			if j+1 < len(data) && data[j+1] == '\n' {
				lines++
			}
			j++
		case c == '\n':
			if !multi {
				return j - 1, lines
			}
			lines++
		case c == q && !multi:
			return j, lines
		case c == q && j+2 < len(data) && data[j+1] == q && data[j+2] == q:
			return j + 2, lines
		}
	}
	return len(data) - 1, lines
}

// MaxContextBytes is the most hints (.ralph/context.md, which `ralph
// add-context` appends to) that ralph puts into one prompt. The hints go
// whole into the prompt, so their size is the prompt's: 256 KB is about
// 64,000 tokens, a third of a 200,000-token model window, and a thousand
// hints of two hundred words. More is a file written by mistake (a log
// or a document pasted in), which would crowd the task out of the
// agent's context or exceed it.
const MaxContextBytes = 256 << 10

// ContextHint is what to do about hints beyond MaxContextBytes.
const ContextHint = "shorten it to the hints the next iteration needs (a path to a longer document in a hint is enough), or remove it"

// CheckContextSize refuses hints of size bytes at name when they are more
// than MaxContextBytes.
func CheckContextSize(name string, size int64) error {
	if size <= MaxContextBytes {
		return nil
	}
	return &Error{Name: name, Msg: fmt.Sprintf("%s of hints is more than the %d KB ralph puts into a prompt", kilobytes(size), MaxContextBytes>>10), Hint: ContextHint}
}

func kilobytes(n int64) string {
	if n >= 1<<20 {
		return megabytes(n)
	}
	return fmt.Sprintf("%d KB", (n+1023)>>10)
}
