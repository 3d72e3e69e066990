package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A config.toml nested deeper than any real one is refused with a message
// naming it, instead of BurntSushi/toml spending seconds and gigabytes on
// it (4,000 nested inline tables took 2 s and 775 MB; memory grows with the
// square of the depth).
func TestDeeplyNestedConfigIsRefused(t *testing.T) {
	for name, content := range map[string]string{
		"inline tables": "[agent]\nname = " + strings.Repeat("{b=", 2000),
		"dotted key":    strings.Repeat("b.", 2000) + "b = 1\n",
	} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "config.toml")
			if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := Load(path)
			want := path + ": nesting deeper than 100 levels at line "
			if err == nil || !strings.HasPrefix(err.Error(), want) {
				t.Fatalf("err = %v, want it to start with %q", err, want)
			}
		})
	}
}
