package thread

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/ralphloop/ralph/internal/store"
)

// The thread's files, all relative to the .ralph folder (ralphDir):
//
//	threads/<id>/thread.json   thread state (Save, Load)
//	threads/<id>/spec/vN.md    spec revisions, immutable (WriteSpec, AddSpec)
//	spec/threads/<id>.jsonl    spec conversation, append-only (AppendMessage)
//	active_thread              the selected thread id, plain text (SetActive)

// Dir is the thread's folder.
func Dir(ralphDir, id string) string { return filepath.Join(ralphDir, "threads", id) }

// Path is the thread's state file.
func Path(ralphDir, id string) string { return filepath.Join(Dir(ralphDir, id), "thread.json") }

// SpecPath is revision version of the thread's spec.
func SpecPath(ralphDir, id string, version int) string {
	return filepath.Join(Dir(ralphDir, id), "spec", "v"+strconv.Itoa(version)+".md")
}

// ConversationPath is the thread's spec conversation log.
func ConversationPath(ralphDir, id string) string {
	return filepath.Join(ralphDir, "spec", "threads", id+".jsonl")
}

// ActivePath is the file that names the selected thread.
func ActivePath(ralphDir string) string { return filepath.Join(ralphDir, "active_thread") }

// BranchName is the branch a thread's implementation is made on.
func BranchName(id string) string { return "ralph/" + id }

var idPattern = regexp.MustCompile(`^[0-9A-Za-z][0-9A-Za-z._-]{0,63}$`)

// ValidateID refuses an id that could not be a folder name under threads/
// (empty, too long, a path, hidden).
func ValidateID(id string) error {
	if !idPattern.MatchString(id) {
		return fmt.Errorf("%q is not a thread id: use letters, digits, '.', '_' or '-' (at most 64, not starting with '.')", id)
	}
	return nil
}

// ErrSpecExists is wrapped by *SpecExistsError.
var ErrSpecExists = errors.New("spec version exists")

// SpecExistsError is an attempt to overwrite a spec revision.
type SpecExistsError struct {
	ID      string
	Version int
}

func (e *SpecExistsError) Error() string {
	return fmt.Sprintf("spec v%d of thread %s already exists and spec revisions are immutable: write a new version instead",
		e.Version, e.ID)
}

func (e *SpecExistsError) Unwrap() []error { return []error{ErrSpecExists, os.ErrExist} }

// WriteSpec writes revision version (1 or more) of the thread's spec. A
// revision is immutable: writing one that exists is a *SpecExistsError and
// leaves it untouched. The file appears complete or not at all: it is
// written to a temporary file and hard-linked into place, which fails when
// the name is taken.
func WriteSpec(ralphDir, id string, version int, content []byte) error {
	if err := ValidateID(id); err != nil {
		return err
	}
	if version < 1 {
		return fmt.Errorf("spec version %d: versions start at 1", version)
	}
	path := SpecPath(ralphDir, id, version)
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if _, err := os.Lstat(path); err == nil {
		return &SpecExistsError{ID: id, Version: version}
	}
	tmp, err := os.CreateTemp(dir, filepath.Base(path)+".*.tmp")
	if err != nil {
		return err
	}
	tmpName := tmp.Name()
	defer os.Remove(tmpName)
	_, err = tmp.Write(content)
	if err == nil {
		err = tmp.Chmod(0o444)
	}
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	if err := os.Link(tmpName, path); err != nil {
		if errors.Is(err, os.ErrExist) {
			return &SpecExistsError{ID: id, Version: version}
		}
		// A filesystem without hard links: create exclusively instead.
		if err := writeExclusive(path, content); err != nil {
			if errors.Is(err, os.ErrExist) {
				return &SpecExistsError{ID: id, Version: version}
			}
			return err
		}
	}
	return store.SyncDir(dir)
}

func writeExclusive(path string, content []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o444)
	if err != nil {
		return err
	}
	_, err = f.Write(content)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(path)
	}
	return err
}

// ReadSpec reads revision version of the thread's spec.
func ReadSpec(ralphDir, id string, version int) ([]byte, error) {
	if err := ValidateID(id); err != nil {
		return nil, err
	}
	return os.ReadFile(SpecPath(ralphDir, id, version))
}

var specName = regexp.MustCompile(`^v([1-9][0-9]*)\.md$`)

// SpecVersions lists the thread's spec revisions, ascending.
func SpecVersions(ralphDir, id string) ([]int, error) {
	if err := ValidateID(id); err != nil {
		return nil, err
	}
	entries, err := os.ReadDir(filepath.Join(Dir(ralphDir, id), "spec"))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []int
	for _, e := range entries {
		if m := specName.FindStringSubmatch(e.Name()); m != nil && e.Type().IsRegular() {
			if v, err := strconv.Atoi(m[1]); err == nil {
				out = append(out, v)
			}
		}
	}
	sort.Ints(out)
	return out, nil
}

// AddSpec writes content as the thread's next spec revision and returns its
// version.
func AddSpec(ralphDir, id string, content []byte) (int, error) {
	for range 10 {
		vs, err := SpecVersions(ralphDir, id)
		if err != nil {
			return 0, err
		}
		next := 1
		if len(vs) > 0 {
			next = vs[len(vs)-1] + 1
		}
		err = WriteSpec(ralphDir, id, next, content)
		if errors.Is(err, ErrSpecExists) {
			continue // another writer took this version
		}
		return next, err
	}
	return 0, fmt.Errorf("thread %s: could not add a spec version: too many concurrent writers", id)
}

// Message is one turn of the spec conversation.
type Message struct {
	Role        string    `json:"role"` // "user", "assistant", "assessor"
	Content     string    `json:"content"`
	At          time.Time `json:"at"`
	SpecVersion int       `json:"spec_version,omitempty"`
}

// AppendMessage appends one line to the thread's spec conversation.
func AppendMessage(ralphDir, id string, m Message) error {
	if err := ValidateID(id); err != nil {
		return err
	}
	path := ConversationPath(ralphDir, id)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return store.AppendJSONLine(path, m)
}

// ReadConversation reads the thread's spec conversation; none yet is an
// empty one. A final line without its newline is a write cut short by a
// crash and is ignored when it does not parse; any other bad line is an
// error naming it.
func ReadConversation(ralphDir, id string) ([]Message, error) {
	if err := ValidateID(id); err != nil {
		return nil, err
	}
	path := ConversationPath(ralphDir, id)
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	r := bufio.NewReader(f)
	var out []Message
	for n := 1; ; n++ {
		line, err := r.ReadBytes('\n')
		if err != nil && err != io.EOF {
			return out, err
		}
		complete := err == nil
		if t := bytes.TrimSpace(line); len(t) > 0 {
			var m Message
			if uerr := json.Unmarshal(t, &m); uerr != nil {
				if !complete {
					break
				}
				return out, fmt.Errorf("%s:%d: %w", path, n, uerr)
			}
			out = append(out, m)
		}
		if !complete {
			break
		}
	}
	return out, nil
}

// ActiveThread returns the selected thread id, or "" when none is selected.
func ActiveThread(ralphDir string) (string, error) {
	b, err := os.ReadFile(ActivePath(ralphDir))
	if errors.Is(err, os.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	id := strings.TrimSpace(string(b))
	if id == "" {
		return "", nil
	}
	if err := ValidateID(id); err != nil {
		return "", fmt.Errorf("%s: %w: select a thread again", ActivePath(ralphDir), err)
	}
	return id, nil
}

// SetActive selects thread id, atomically.
func SetActive(ralphDir, id string) error {
	if err := ValidateID(id); err != nil {
		return err
	}
	if err := os.MkdirAll(ralphDir, 0o755); err != nil {
		return err
	}
	return store.WriteFileAtomic(ActivePath(ralphDir), []byte(id+"\n"), 0o644)
}

// idAlphabet is Crockford's base32 in lower case. Its characters are in
// ascending byte order, so fixed-width ids sort as their numbers do.
const idAlphabet = "0123456789abcdefghjkmnpqrstvwxyz"

const (
	idTimeChars = 7 // seconds since 1970: 32^7 s lasts until the year 3058
	idRandChars = 4 // about a million ids per second
)

var (
	idMu   sync.Mutex
	lastID string
)

// NewID returns a short thread id (11 characters of [0-9a-z]) that sorts
// in creation order: seven characters of time, four of randomness. Within
// one process ids strictly increase; across processes Create claims the id
// by making its folder exclusively.
func NewID() string { return newID(time.Now(), rand.Reader) }

func newID(now time.Time, r io.Reader) string {
	b := make([]byte, idTimeChars+idRandChars)
	sec := uint64(max(now.Unix(), 0))
	for i := idTimeChars - 1; i >= 0; i-- {
		b[i] = idAlphabet[sec%32]
		sec /= 32
	}
	rnd := make([]byte, idRandChars)
	if _, err := io.ReadFull(r, rnd); err != nil {
		// No randomness: the monotonic step below still keeps ids unique
		// within this process, and Create's exclusive folder across them.
		clear(rnd)
	}
	for i, c := range rnd {
		b[idTimeChars+i] = idAlphabet[c%32]
	}
	id := string(b)
	idMu.Lock()
	defer idMu.Unlock()
	if id <= lastID {
		id = incrementID(lastID)
	}
	lastID = id
	return id
}

// incrementID adds one to an id read as a base-32 number.
func incrementID(id string) string {
	b := []byte(id)
	for i := len(b) - 1; i >= 0; i-- {
		k := strings.IndexByte(idAlphabet, b[i])
		if k < len(idAlphabet)-1 {
			b[i] = idAlphabet[k+1]
			return string(b)
		}
		b[i] = idAlphabet[0]
	}
	return "1" + string(b)
}
