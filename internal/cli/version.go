package cli

import (
	"fmt"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// VersionInfo is what `ralph version --json` prints. It comes from the
// build information the Go toolchain writes into the binary, so a binary
// built by `go install` or `go build` in a checkout knows where it came
// from without any release step.
type VersionInfo struct {
	// Version is the module version: a tag such as v1.2.0 for
	// `go install ...@v1.2.0`, "(devel)" for a build in a checkout.
	Version string `json:"version"`
	// Commit is the git commit the binary was built from, "" when unknown
	// (go test and builds outside a checkout do not record it).
	Commit string `json:"commit"`
	// Date is the time of that commit (RFC 3339). Go records no build
	// time, and a build date would make identical sources differ.
	Date string `json:"date"`
	// Modified is true when the checkout had uncommitted changes.
	Modified bool   `json:"modified"`
	Go       string `json:"go"`
}

func readVersion() VersionInfo {
	v := VersionInfo{Version: "(devel)"}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return v
	}
	if bi.Main.Version != "" {
		v.Version = bi.Main.Version
	}
	v.Go = bi.GoVersion
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			v.Commit = s.Value
		case "vcs.time":
			v.Date = s.Value
		case "vcs.modified":
			v.Modified = s.Value == "true"
		}
	}
	return v
}

// line is the one-line form of --version: "v1.2.0 (commit 1a2b3c4d5e6f,
// 2025-06-01T10:00:00Z)".
func (v VersionInfo) line() string {
	if v.Commit == "" {
		return v.Version
	}
	commit := v.Commit
	if len(commit) > 12 {
		commit = commit[:12]
	}
	if v.Modified {
		commit += ", modified"
	}
	if v.Date != "" {
		commit += ", " + v.Date
	}
	return v.Version + " (commit " + commit + ")"
}

func newVersionCmd(env *Env) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print ralph's version, the commit it was built from and that commit's date",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			v := readVersion()
			out := env.IO.Out
			if asJSON {
				return writeJSON(env, v)
			}
			fmt.Fprintf(out, "ralph %s\n", v.Version)
			commit, date := v.Commit, v.Date
			if commit == "" {
				commit = "unknown (not built from a git checkout)"
			} else if v.Modified {
				commit += " (with uncommitted changes)"
			}
			if date == "" {
				date = "unknown"
			}
			fmt.Fprintf(out, "commit: %s\n", commit)
			fmt.Fprintf(out, "date:   %s\n", date)
			fmt.Fprintf(out, "go:     %s\n", v.Go)
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}
