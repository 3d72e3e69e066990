package store

import (
	"fmt"
	"strings"
	"unicode"
)

// MaxIDBytes bounds an id that names a folder or file.
const MaxIDBytes = 128

// CheckID refuses an id that ralph reads back from its own files (a run,
// session, thread or worker id) and then uses as a folder or file name,
// when it could not be exactly one name inside that folder: empty, too
// long, "." or "..", hidden, holding a path separator or a control
// character. Ralph never writes such an id; one edited into a file by hand
// would put run records, trailers and deletions outside the repository.
// what names the field for the error, e.g. "run_id".
func CheckID(what, id string) error {
	why := ""
	switch {
	case id == "":
		why = "it is empty"
	case len(id) > MaxIDBytes:
		why = fmt.Sprintf("it is longer than %d bytes", MaxIDBytes)
	case strings.HasPrefix(id, "."):
		why = "it starts with '.'"
	case strings.ContainsAny(id, `/\`):
		why = "it holds a path separator"
	case strings.IndexFunc(id, unicode.IsControl) >= 0:
		why = "it holds a control character"
	default:
		return nil
	}
	return fmt.Errorf("%s %q is not an id ralph writes (%s)", what, id, why)
}
