package store

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ralphloop/ralph/internal/testing/wait"
)

// A record is replaced whole, leaves no temporary file, and costs no
// fsync: the fsyncs are what a record skips.
func TestWriteRecordReplacesWithoutFsync(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "iter-1.json")
	_, s0 := WriteCounts()
	r0 := RecordCounts()
	for _, content := range []string{"one", "two"} {
		if err := WriteRecord(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		if got, _ := os.ReadFile(p); string(got) != content {
			t.Fatalf("content = %q, want %q", got, content)
		}
	}
	if err := WriteJSONRecord(p, map[string]int{"schema_version": 1}); err != nil {
		t.Fatal(err)
	}
	var v struct {
		SchemaVersion int `json:"schema_version"`
	}
	if _, err := ReadJSON(p, 1, &v); err != nil || v.SchemaVersion != 1 {
		t.Fatalf("ReadJSON of a record: %+v, %v", v, err)
	}
	if _, s1 := WriteCounts(); s1 != s0 {
		t.Errorf("records made %d fsyncs, want none", s1-s0)
	}
	if n := RecordCounts() - r0; n != 3 {
		t.Errorf("RecordCounts grew by %d, want 3", n)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("folder holds %d entries, want only the record", len(entries))
	}
	// A failed write keeps the old record and leaves no temporary file.
	bad := filepath.Join(dir, "sub")
	os.Mkdir(bad, 0o755)
	os.WriteFile(filepath.Join(bad, "x"), nil, 0o644)
	if err := WriteRecord(bad, []byte("new"), 0o644); err == nil {
		t.Fatal("rename over a non-empty folder succeeded")
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".tmp") {
			t.Fatalf("temp file %s left behind", e.Name())
		}
	}
}

// recordWriterEnv makes the test binary a writer that replaces a record
// with big contents of one letter, then another, until it is killed.
const recordWriterEnv = "STORE_TEST_RECORD_WRITER"

func TestMain(m *testing.M) {
	if p := os.Getenv(recordWriterEnv); p != "" {
		a, b := bytes.Repeat([]byte("a"), 4<<20), bytes.Repeat([]byte("b"), 4<<20)
		for i := 0; ; i++ {
			data := a
			if i%2 == 1 {
				data = b
			}
			if err := WriteRecord(p, data, 0o644); err != nil {
				os.Exit(3)
			}
			if i == 0 {
				// Ready once a whole record is there: a kill from
				// now on lands on a replacement, whose old record
				// the test can check was kept.
				os.WriteFile(p+".ready", nil, 0o644)
			}
		}
	}
	os.Exit(m.Run())
}

// The guarantee a record keeps without fsync: a process killed at any
// instant (what the crash tests do to ralph) leaves the old record or the
// whole new one, never a torn one. The writer is killed many times at
// random instants while it writes 4 MB records.
func TestWriteRecordIsWholeAfterAKill(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "run.json")
	for round := 0; round < 8; round++ {
		os.Remove(p + ".ready")
		cmd := exec.Command(os.Args[0], "-test.run", "^$")
		cmd.Env = append(os.Environ(), recordWriterEnv+"="+p)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		wait.Until(t, wait.Long, func() bool { _, err := os.Stat(p + ".ready"); return err == nil }, "the writer's first whole record")
		// The kill's instant is the behaviour under test: a different
		// one each round, somewhere in the stream of replacements.
		time.Sleep(time.Duration(5+round*7) * time.Millisecond)
		cmd.Process.Signal(syscall.SIGKILL)
		cmd.Wait()
		got, err := os.ReadFile(p)
		if err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		if len(got) != 4<<20 || (!bytes.Equal(got, bytes.Repeat([]byte("a"), 4<<20)) && !bytes.Equal(got, bytes.Repeat([]byte("b"), 4<<20))) {
			t.Fatalf("round %d: the record is torn after a kill: %d bytes, starting %.20q", round, len(got), got)
		}
	}
}
