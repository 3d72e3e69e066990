package inputlimit

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

type checkCase struct {
	name string
	in   string
	line int // 0: accepted; otherwise refused as too deep at this line
}

func runChecks(t *testing.T, check func(string, []byte) error, cases []checkCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := check("input.txt", []byte(tc.in))
			if tc.line == 0 {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			var e *Error
			if !errors.As(err, &e) || e.Line != tc.line {
				t.Fatalf("err = %v, want a refusal at line %d", err, tc.line)
			}
			want := "input.txt: nesting deeper than 100 levels at line " + strconv.Itoa(tc.line) + ": ralph refuses it; is the file corrupted?"
			if !strings.HasPrefix(err.Error(), want) {
				t.Fatalf("err = %q, want it to start with %q", err, want)
			}
		})
	}
}

func deep(open string, n int) string { return strings.Repeat(open, n) }

func TestCheckJSON(t *testing.T) {
	runChecks(t, CheckJSON, []checkCase{
		{"state", `{"schema_version": 1, "tasks": {"US-001": {"attempts": [1, 2]}}}`, 0},
		{"exactly the limit", deep("[", MaxDepth) + deep("]", MaxDepth), 0},
		{"brackets in strings", `{"a": "` + deep("[{", 300) + `\"` + deep("[", 300) + `"}`, 0},
		{"many siblings", "[" + strings.Repeat("[[1]],", 5000) + "[]]", 0},
		{"one past the limit", "{\n\"a\":\n" + deep("[", MaxDepth), 3},
		{"objects", deep(`{"a":`, 200), 1},
		{"unclosed string hides nothing it should not", `"` + deep("[", 500), 0},
	})
}

func TestCheckTOML(t *testing.T) {
	runChecks(t, CheckTOML, []checkCase{
		{"config", "schema_version = 1\n[agent]\nname = \"claude\" # a comment [[[[\nargs = [\"--model\", \"x\"]\n[[checks]]\nname = 'tests'\ncmd = '''\ngo test ./... [[[[\n'''\n[loop.limits]\nmax = 1.5\nnested = [[1, 2], [3]]\ninline = {a.b = 1, c = {d = 2}}\n", 0},
		{"deep arrays", "a = " + deep("[", 200), 1},
		{"deep inline tables", "x = 1\na = " + deep("{b=", 200), 2},
		{"long dotted key", "\n\n" + strings.Repeat("b.", 200) + "b = 1\n", 3},
		{"long table header", "[" + strings.Repeat("b.", 200) + "b]\n", 1},
		{"dots in values do not count", "a = \"" + strings.Repeat("b.", 500) + "\"\nv = [" + strings.Repeat("1.5, ", 500) + "]\n", 0},
		{"brackets in comments and strings", "# " + deep("[", 500) + "\na = \"" + deep("{", 500) + "\"\nb = '" + deep("[", 500) + "'\n", 0},
	})
}

func TestCheckYAML(t *testing.T) {
	var indented strings.Builder
	for i := range MaxDepth + 1 {
		indented.WriteString(strings.Repeat(" ", i) + "k:\n")
	}
	runChecks(t, CheckYAML, []checkCase{
		{"progress file", progressFile, 0},
		{"flow sequences", "stories: " + deep("[", 200), 1},
		{"flow mappings", "# c\nstories: " + deep("{a: ", 200), 2},
		{"flow across lines", "stories: [\n" + strings.Repeat("[\n", 200), 100},
		{"compact block sequences", "stories:\n" + strings.Repeat("- ", 200) + "x\n", 2},
		{"compact keys", strings.Repeat("? ", 200) + "x\n", 1},
		{"indented mappings", indented.String(), MaxDepth + 1},
		{"after a document marker", "--- " + deep("[", 200), 1},
		{"flow under an anchor", "a: &x !!seq " + deep("[", 200), 1},
		{"quoted key", `"a": ` + deep("[", 200), 1},
		{"brackets in quoted scalars", "a: \"" + deep("[", 300) + "\\\"\"\nb: '" + deep("{", 300) + "'' '\nc: [\"" + deep("[", 300) + "\", '" + deep("[", 300) + "']\n", 0},
		{"brackets in plain scalars", "title: a" + deep("[", 300) + "\n- b" + deep("{", 300) + "\n", 0},
		{"brackets in comments", "a: 1 # " + deep("[", 300) + "\n# " + deep("{", 300) + "\n", 0},
		{"brackets in block scalars", "a: |\n  " + deep("[", 300) + "\n\n  more\nb: >-\n   " + deep("{", 300) + "\nc: d\n", 0},
		{"multi-line quoted scalar", "a: \"one\n  " + deep("[", 300) + "\n  two\"\nb: 1\n", 0},
		{"apostrophe in a flow plain scalar", "a: [don't, " + deep("[", 200) + "\n", 1},
		{"not a block scalar header", "a: |x\nb: " + deep("[", 200), 2},
		{"CRLF", "a:\r\n  - b: c\r\n    d: [e, f]\r\n", 0},
	})
}

// progressFile is a progress.txt as ralph writes it, with the constructs
// that must not count as nesting.
const progressFile = `# progress.txt [[[
current_task: "1.1/1.1.2"
last_updated: 2026-11-22T10:00:00Z
stories:
  - id: "1.1"            # quote ids [x]
    title: Fix a[0] and {b}
    description: |
      Text with [[[ and {{{ that is not structure.
    status: blocked
    acceptance_criteria:
      - The list shows [x] next to finished items
      - text: The tests pass
        verify: sh -c 'test "$(echo [)" = ['
    subtasks:
      - id: "1.1.1"
        done: true
    depends_on: ["1.0", '1.2']
    attempted_fixes: ["retried [once]"]
metrics: {stories_completed: 0, nested: {a: [1, [2]]}}
`

func TestCheckSize(t *testing.T) {
	if err := CheckSize("prd.md", make([]byte, MaxBytes)); err != nil {
		t.Fatalf("a file of exactly MaxBytes refused: %v", err)
	}
	err := CheckYAML("progress.txt", make([]byte, MaxBytes+1))
	want := "progress.txt: 16.0 MB is larger than the 16.0 MB ralph reads: ralph refuses it; is the file corrupted?"
	if err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Fatalf("err = %v, want it to start with %q", err, want)
	}
}

func TestReadFile(t *testing.T) {
	dir := t.TempDir()
	small := filepath.Join(dir, "prd.json")
	if err := os.WriteFile(small, []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	if data, err := ReadFile(small); err != nil || string(data) != "{}" {
		t.Fatalf("ReadFile = %q, %v", data, err)
	}
	if _, err := ReadFile(filepath.Join(dir, "missing")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("missing file: err = %v, want fs.ErrNotExist", err)
	}

	big := filepath.Join(dir, "big.json")
	if err := os.WriteFile(big, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(big, MaxBytes+1); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadFile(big); !IsRefusal(err) || !strings.Contains(err.Error(), big+": 16.0 MB is larger than") {
		t.Fatalf("big file: err = %v, want a refusal naming it", err)
	}

	// A device is no file: it is refused before it is read.
	if _, err := os.Stat("/dev/zero"); err == nil {
		if _, err := ReadFile("/dev/zero"); !IsRefusal(err) || !strings.Contains(err.Error(), "/dev/zero: it is a device, not a regular file") {
			t.Fatalf("/dev/zero: err = %v, want a refusal", err)
		}
	}
}

// A named pipe in place of a file is refused at once, with no writer on
// it (an open for reading would wait for one forever) and with a writer
// that never writes; so are a folder and a socket. A symbolic link to a
// regular file is read.
func TestReadFileRefusesWhatIsNotARegularFile(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "prd.md")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Skipf("no named pipes here: %v", err)
	}
	done := make(chan error, 1)
	go func() { _, err := ReadFile(fifo); done <- err }()
	select {
	case err := <-done:
		if !IsRefusal(err) || !strings.Contains(err.Error(), fifo+": it is a named pipe (FIFO), not a regular file: ralph refuses it; ") {
			t.Fatalf("FIFO: err = %v, want a refusal naming it", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("ReadFile of a named pipe without a writer blocked")
	}
	// A writer holds the pipe open and writes nothing.
	w, err := os.OpenFile(fifo, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if _, err := ReadFile(fifo); !IsRefusal(err) {
		t.Fatalf("FIFO with a writer: err = %v, want a refusal", err)
	}
	if _, err := ReadFile(dir); !IsRefusal(err) || !strings.Contains(err.Error(), "a folder, not a file") {
		t.Fatalf("folder: err = %v, want a refusal", err)
	}
	file := filepath.Join(dir, "real.md")
	os.WriteFile(file, []byte("# PRD\n"), 0o644)
	link := filepath.Join(dir, "link.md")
	if err := os.Symlink(file, link); err != nil {
		t.Fatal(err)
	}
	if b, err := ReadFile(link); err != nil || string(b) != "# PRD\n" {
		t.Fatalf("symlink to a file: %q, %v", b, err)
	}
	if _, err := ReadFile(filepath.Join(dir, "missing")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("missing: err = %v, want fs.ErrNotExist", err)
	}
}

// The nested files of the report are refused, whatever their size, after
// reading them once.
func BenchmarkCheckYAMLNested500KB(b *testing.B) {
	data := []byte("stories: " + strings.Repeat("[", 500<<10))
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		if err := CheckYAML("progress.txt", data); err == nil {
			b.Fatal("accepted")
		}
	}
}

// A large flat file is what the checks cost on every load.
func BenchmarkCheckYAMLFlat(b *testing.B) {
	data := []byte(strings.Repeat(progressFile, (4<<20)/len(progressFile)))
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		if err := CheckYAML("progress.txt", data); err != nil {
			b.Fatal(err)
		}
	}
}
