package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func write(t *testing.T, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "config.toml")
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestTemplateLoadsBackWithChecks(t *testing.T) {
	checks := []CheckConfig{{Name: "go test", Kind: "test", Run: "go test ./...", Timeout: Duration{10 * time.Minute}}}
	cfg, err := Load(write(t, string(Template(checks, []string{"codex", "claude"}))))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Agent.Default != "codex" || cfg.Build.MaxIterations != 25 || cfg.Agent.Timeout.Duration != 30*time.Minute ||
		cfg.Sandbox.Mode != "off" || cfg.Sandbox.Network != "proxy" || !cfg.Sandbox.Checks {
		t.Fatalf("defaults not read back: %+v", cfg)
	}
	if len(cfg.Checks) != 1 || cfg.Checks[0].Run != "go test ./..." || cfg.Checks[0].Timeout.Duration != 10*time.Minute {
		t.Fatalf("checks = %+v", cfg.Checks)
	}
}

func TestMissingFileGivesDefaults(t *testing.T) {
	cfg, err := Load(filepath.Join(t.TempDir(), "none.toml"))
	if err != nil || cfg.Build.PRD != ".agents/tasks/prd.md" {
		t.Fatalf("cfg=%+v err=%v", cfg, err)
	}
}

func TestLoadErrors(t *testing.T) {
	for _, tc := range []struct{ name, content, want string }{
		{"unknown key", "[build]\nmax_iteration = 3\n", "unknown key build.max_iteration"},
		{"syntax", "[build\n", "line 2"},
		{"bad duration", "[agent]\ntimeout = \"ten minutes\"\n", "invalid duration"},
		{"newer schema", "schema_version = 7\n", "upgrade ralph"},
		{"check without run", "[[checks]]\nname = \"x\"\n", "no run command"},
		{"bad kind", "[[checks]]\nname = \"x\"\nrun = \"true\"\nkind = \"smoke\"\n", "use typecheck, lint, test or e2e"},
		{"agent without command", "[agents.mine]\nformat = \"plain\"\n", "needs command"},
		{"redact a value", "[security]\nredact = [\"KEY=abc\"]\n", "names of environment variables"},
		{"sandbox mode", "[sandbox]\nmode = \"docker\"\n", `[sandbox] mode = "docker": use off, bwrap or auto`},
		{"sandbox network", "[sandbox]\nnetwork = \"some\"\n", `[sandbox] network = "some": use proxy, none or open`},
		{"sandbox relative path", "[sandbox]\nwritable = [\"cache\"]\n", `[sandbox] writable = ["cache"]: give an absolute path`},
		{"sandbox env value", "[sandbox]\nenv = [\"A=b\"]\n", "names of environment variables"},
		{"sandbox host url", "[sandbox]\nallow_hosts = [\"https://x.org\"]\n", "without a scheme"},
		{"sandbox host port", "[sandbox]\nallow_hosts = [\"x.org:http\"]\n", `allow_hosts = ["x.org:http"]`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Load(write(t, tc.content))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want it to contain %q", err, tc.want)
			}
		})
	}
}

func TestSecurityRedactIsRead(t *testing.T) {
	cfg, err := Load(write(t, "[security]\nredact = [\"DEPLOY_KEY\", \"SENTRY_DSN\"]\n"))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(cfg.Security.Redact, ",") != "DEPLOY_KEY,SENTRY_DSN" {
		t.Fatalf("Security.Redact = %q", cfg.Security.Redact)
	}
}
