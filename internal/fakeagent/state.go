package fakeagent

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// State is what the fake agent remembers between processes of one scenario.
type State struct {
	// Calls counts the processes that picked an invocation.
	Calls int `json:"calls"`
	// Used counts, per invocation index, how many times it was picked.
	Used []int `json:"used"`
}

// StatePath returns the state file of the scenario at scenarioPath.
func StatePath(scenarioPath string) string { return scenarioPath + ".state.json" }

// ReadState returns the use counts of the scenario at scenarioPath; a
// scenario that never ran has a zero State.
func ReadState(scenarioPath string) (State, error) {
	data, err := os.ReadFile(StatePath(scenarioPath))
	if errors.Is(err, os.ErrNotExist) {
		return State{}, nil
	}
	if err != nil {
		return State{}, err
	}
	var st State
	if err := json.Unmarshal(data, &st); err != nil {
		return State{}, fmt.Errorf("state file %s: %v", StatePath(scenarioPath), err)
	}
	return st, nil
}

// claim picks the invocation for prompt and records its use. It returns the
// invocation index (-1 if none is selectable) and the 1-based call number.
// The read-modify-write runs under an exclusive flock on a side lock file,
// so concurrent processes never lose a count.
func claim(scenarioPath string, sc Scenario, prompt string) (int, int, error) {
	lockPath := StatePath(scenarioPath) + ".lock"
	lf, err := os.OpenFile(lockPath, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return -1, 0, err
	}
	defer lf.Close()
	for {
		err = syscall.Flock(int(lf.Fd()), syscall.LOCK_EX)
		if !errors.Is(err, syscall.EINTR) {
			break
		}
	}
	if err != nil {
		return -1, 0, fmt.Errorf("lock %s: %v", lockPath, err)
	}
	defer syscall.Flock(int(lf.Fd()), syscall.LOCK_UN) //nolint:errcheck // Close releases it anyway

	st, err := ReadState(scenarioPath)
	if err != nil {
		return -1, 0, err
	}
	for len(st.Used) < len(sc.Invocations) {
		st.Used = append(st.Used, 0)
	}
	idx := -1
	for i, inv := range sc.Invocations {
		if inv.Match != "" && !strings.Contains(prompt, inv.Match) {
			continue
		}
		if inv.Times > 0 && st.Used[i] >= inv.Times {
			continue
		}
		idx = i
		break
	}
	if idx < 0 {
		return -1, st.Calls, nil
	}
	st.Used[idx]++
	st.Calls++
	data, err := json.Marshal(st)
	if err != nil {
		return -1, 0, err
	}
	if err := writeFileAtomic(StatePath(scenarioPath), append(data, '\n'), 0o644); err != nil {
		return -1, 0, err
	}
	return idx, st.Calls, nil
}

// writeFileAtomic writes data to a temp file in path's folder, syncs it and
// renames it over path.
func writeFileAtomic(path string, data []byte, perm os.FileMode) error {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	ok := false
	defer func() {
		if !ok {
			os.Remove(tmp)
		}
	}()
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Chmod(perm); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	ok = true
	return nil
}
