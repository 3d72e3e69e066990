package store

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// dfAvail is what `df` tells the user is available at dir, in bytes.
func dfAvail(t *testing.T, dir string) uint64 {
	t.Helper()
	out, err := exec.Command("df", "-Pk", dir).Output()
	if err != nil {
		t.Fatalf("df, the reference for free space, failed: %v", err)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	fields := strings.Fields(lines[len(lines)-1])
	if len(fields) < 4 {
		t.Fatalf("unexpected df output %q", out)
	}
	kib, err := strconv.ParseUint(fields[3], 10, 64)
	if err != nil {
		t.Fatalf("unexpected df output %q: %v", out, err)
	}
	return kib << 10
}

// within reports whether a and b differ by at most slack: other processes
// on the machine write and delete files between two measurements.
func within(a, b, slack uint64) bool {
	if a > b {
		a, b = b, a
	}
	return b-a <= slack
}

const slack = 256 << 20

func TestFreeBytesAgreesWithDf(t *testing.T) {
	dir := t.TempDir()
	got, err := FreeBytes(dir)
	if err != nil {
		t.Fatal(err)
	}
	if want := dfAvail(t, dir); got == 0 || !within(got, want, slack) {
		t.Errorf("FreeBytes(%s) = %d, df says %d available", dir, got, want)
	}
}

// TestFreeBytesOfAFolderNotMadeYet is the worktree root's case: ralph checks
// the room before it makes ../.ralph-worktrees/<repo>.
func TestFreeBytesOfAFolderNotMadeYet(t *testing.T) {
	dir := t.TempDir()
	parent, err := FreeBytes(dir)
	if err != nil {
		t.Fatal(err)
	}
	got, err := FreeBytes(filepath.Join(dir, "not", "made", "yet"))
	if err != nil {
		t.Fatalf("FreeBytes of a folder not made yet: %v", err)
	}
	if got == 0 || !within(got, parent, slack) {
		t.Errorf("FreeBytes of a folder not made yet = %d, its existing parent has %d", got, parent)
	}
}

func TestFreeBytesErrorNamesThePath(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(file, "sub")
	_, err := FreeBytes(bad)
	if err == nil || !strings.Contains(err.Error(), bad) || !strings.Contains(err.Error(), "free disk space") {
		t.Errorf("FreeBytes below a file: error %v, want one naming %s", err, bad)
	}
}
