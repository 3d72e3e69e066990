package thread

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestLayoutPaths(t *testing.T) {
	for got, want := range map[string]string{
		Dir(".ralph", "abc"):              ".ralph/threads/abc",
		Path(".ralph", "abc"):             ".ralph/threads/abc/thread.json",
		SpecPath(".ralph", "abc", 3):      ".ralph/threads/abc/spec/v3.md",
		ConversationPath(".ralph", "abc"): ".ralph/spec/threads/abc.jsonl",
		ActivePath(".ralph"):              ".ralph/active_thread",
		BranchName("abc"):                 "ralph/abc",
	} {
		if got != filepath.FromSlash(want) && got != want {
			t.Errorf("got %s, want %s", got, want)
		}
	}
}

func TestSpecVersionsAreImmutable(t *testing.T) {
	dir := t.TempDir()
	if err := WriteSpec(dir, "abc", 1, []byte("# v1\n")); err != nil {
		t.Fatal(err)
	}
	err := WriteSpec(dir, "abc", 1, []byte("# overwritten\n"))
	var se *SpecExistsError
	if !errors.As(err, &se) || !errors.Is(err, ErrSpecExists) || !errors.Is(err, os.ErrExist) || se.Version != 1 {
		t.Fatalf("overwrite: %v", err)
	}
	if !strings.Contains(err.Error(), "immutable") {
		t.Errorf("message %q", err)
	}
	if b, _ := ReadSpec(dir, "abc", 1); string(b) != "# v1\n" {
		t.Fatalf("v1 changed: %q", b)
	}
	if fi, _ := os.Stat(SpecPath(dir, "abc", 1)); fi.Mode().Perm()&0o222 != 0 {
		t.Errorf("spec is writable: %v", fi.Mode())
	}
	for _, v := range []int{0, -1} {
		if err := WriteSpec(dir, "abc", v, nil); err == nil {
			t.Errorf("wrote version %d", v)
		}
	}
	if err := WriteSpec(dir, "../x", 1, nil); err == nil {
		t.Error("wrote a spec for a bad id")
	}
	entries, _ := os.ReadDir(filepath.Dir(SpecPath(dir, "abc", 1)))
	if len(entries) != 1 {
		t.Errorf("spec folder holds %d files, want 1 (no temporary files)", len(entries))
	}
}

func TestAddSpecWritesTheNextVersion(t *testing.T) {
	dir := t.TempDir()
	if vs, err := SpecVersions(dir, "abc"); err != nil || vs != nil {
		t.Fatalf("no specs yet: %v %v", vs, err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var got []int
	for i := range 8 {
		wg.Go(func() {
			v, err := AddSpec(dir, "abc", []byte{byte('a' + i)})
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			got = append(got, v)
			mu.Unlock()
		})
	}
	wg.Wait()
	sort.Ints(got)
	if want := []int{1, 2, 3, 4, 5, 6, 7, 8}; !reflect.DeepEqual(got, want) {
		t.Fatalf("versions %v, want %v", got, want)
	}
	os.WriteFile(filepath.Join(filepath.Dir(SpecPath(dir, "abc", 1)), "notes.md"), nil, 0o644)
	if vs, _ := SpecVersions(dir, "abc"); !reflect.DeepEqual(vs, got) {
		t.Fatalf("SpecVersions = %v", vs)
	}
}

func TestConversationIsAppendOnly(t *testing.T) {
	dir := t.TempDir()
	if msgs, err := ReadConversation(dir, "abc"); err != nil || msgs != nil {
		t.Fatalf("empty: %v %v", msgs, err)
	}
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	want := []Message{
		{Role: "user", Content: "add dark mode", At: at},
		{Role: "assistant", Content: "which pages?\nall of them?", At: at.Add(time.Second), SpecVersion: 1},
	}
	for _, m := range want {
		if err := AppendMessage(dir, "abc", m); err != nil {
			t.Fatal(err)
		}
	}
	got, err := ReadConversation(dir, "abc")
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v %v", got, err)
	}
	path := ConversationPath(dir, "abc")
	raw, _ := os.ReadFile(path)
	if bytes.Count(raw, []byte("\n")) != 2 {
		t.Fatalf("not one line per message:\n%s", raw)
	}
	// A crash in the middle of an append leaves a torn last line: ignored.
	f, _ := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString(`{"role":"user","cont`)
	f.Close()
	if got, err := ReadConversation(dir, "abc"); err != nil || len(got) != 2 {
		t.Fatalf("torn line: %d %v", len(got), err)
	}
	// A bad line in the middle is an error that names it.
	os.WriteFile(path, []byte("{\"role\":\"user\"}\nnot json\n{}\n"), 0o644)
	if _, err := ReadConversation(dir, "abc"); err == nil || !strings.Contains(err.Error(), ".jsonl:2") {
		t.Fatalf("bad line: %v", err)
	}
}

func TestActiveThread(t *testing.T) {
	dir := t.TempDir()
	if id, err := ActiveThread(dir); id != "" || err != nil {
		t.Fatalf("none: %q %v", id, err)
	}
	if err := SetActive(dir, "abc"); err != nil {
		t.Fatal(err)
	}
	if raw, _ := os.ReadFile(ActivePath(dir)); string(raw) != "abc\n" {
		t.Fatalf("active_thread holds %q", raw)
	}
	if id, err := ActiveThread(dir); id != "abc" || err != nil {
		t.Fatalf("got %q %v", id, err)
	}
	os.WriteFile(ActivePath(dir), []byte("  def \n"), 0o644) // edited by hand
	if id, _ := ActiveThread(dir); id != "def" {
		t.Fatalf("got %q", id)
	}
	os.WriteFile(ActivePath(dir), []byte("../../etc\n"), 0o644)
	if _, err := ActiveThread(dir); err == nil {
		t.Fatal("accepted a path as the active thread")
	}
	if err := SetActive(dir, "a/b"); err == nil {
		t.Fatal("selected a bad id")
	}
	if err := ClearActive(dir); err != nil {
		t.Fatal(err)
	}
	if err := ClearActive(dir); err != nil {
		t.Fatal(err)
	}
	if id, _ := ActiveThread(dir); id != "" {
		t.Fatalf("still %q", id)
	}
}

func TestValidateID(t *testing.T) {
	for _, id := range []string{"abc123", "0k3f9a2x7mq", "fix-login_2.b", strings.Repeat("a", 64)} {
		if err := ValidateID(id); err != nil {
			t.Errorf("%q: %v", id, err)
		}
	}
	for _, id := range []string{"", ".", "..", ".hidden", "a/b", `a\b`, "../x", "a b", strings.Repeat("a", 65), "é"} {
		if err := ValidateID(id); err == nil {
			t.Errorf("%q accepted", id)
		}
	}
}

func TestNewIDIsShortSortableAndUnique(t *testing.T) {
	seen := map[string]bool{}
	prev := ""
	for range 10000 {
		id := NewID()
		if len(id) != 11 || ValidateID(id) != nil || strings.Trim(id, idAlphabet) != "" {
			t.Fatalf("bad id %q", id)
		}
		if seen[id] || id <= prev {
			t.Fatalf("id %q after %q is not new and increasing", id, prev)
		}
		seen[id], prev = true, id
	}
	// Later times sort later, whatever the random part. (These ids are in
	// the future; put the process's last id back afterwards.)
	idMu.Lock()
	saved := lastID
	idMu.Unlock()
	t.Cleanup(func() { idMu.Lock(); lastID = saved; idMu.Unlock() })
	zero := bytes.NewReader(make([]byte, 8))
	ones := bytes.NewReader(bytes.Repeat([]byte{31}, 8))
	early := newID(time.Unix(4_000_000_000, 0), ones)
	late := newID(time.Unix(4_000_000_001, 0), zero)
	if !(early < late) || early[:7] == late[:7] {
		t.Fatalf("%s !< %s", early, late)
	}
	// The same second with the same randomness still gives a new, larger id.
	again := newID(time.Unix(4_000_000_001, 0), bytes.NewReader(make([]byte, 8)))
	if again <= late {
		t.Fatalf("%s not after %s", again, late)
	}
	if got := incrementID("0zz"); got != "100" {
		t.Fatalf("incrementID(0zz) = %s", got)
	}
}

// ClearActive deselects the thread.
func ClearActive(ralphDir string) error {
	err := os.Remove(ActivePath(ralphDir))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	return err
}
