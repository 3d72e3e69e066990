package store

import (
	"strings"
	"testing"
)

func TestCheckIDRefusesWhatIsNotOneName(t *testing.T) {
	for _, id := range []string{"20260101-000000-abcdef", "t1", "US-001", "US-001.2", "bd-a1b2", "250301-090000"} {
		if err := CheckID("run_id", id); err != nil {
			t.Errorf("CheckID(%q) = %v, want nil", id, err)
		}
	}
	for id, why := range map[string]string{
		"":                                "empty",
		".":                               "starts with '.'",
		"..":                              "starts with '.'",
		".hidden":                         "starts with '.'",
		"../../../../tmp/x":               "starts with '.'",
		"a/../../x":                       "path separator",
		`a\b`:                             "path separator",
		"/tmp/x":                          "path separator",
		"a\nb":                            "control character",
		"a\x00b":                          "control character",
		strings.Repeat("a", MaxIDBytes+1): "longer than 128",
	} {
		err := CheckID("run_id", id)
		if err == nil || !strings.Contains(err.Error(), why) || !strings.HasPrefix(err.Error(), "run_id ") {
			t.Errorf("CheckID(%q) = %v, want an error saying %q", id, err, why)
		}
	}
}
