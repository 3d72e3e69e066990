package modelserver

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Environments for the real CLIs (agents reference, section 2.5). Each
// helper returns the variables that point one CLI at the server whose base
// URL is baseURL, with home as its HOME (and config directory), and turns
// off its other traffic: telemetry, update checks, model-list fetches. Run
// the CLI with these variables added to a minimal environment (PATH and
// little else: not os.Environ(), which may carry real API keys).
//
// Every helper also sets HTTP_PROXY and HTTPS_PROXY to baseURL and NO_PROXY
// to the loopback addresses: a request for another host reaches the server,
// which refuses and records it (see the package doc).

// StubModel is the model name the opencode config selects.
const StubModel = "stub-model"

// CodexModel is the model the Codex config selects: a model Codex 0.169
// knows, so that it does not open its stream with a "Model metadata for
// `stub-model` not found" error item as it does for an unknown name.
const CodexModel = "gpt-5.5"

// GeminiModel is the model Gemini CLI is pinned to; pass it as -m too.
const GeminiModel = "gemini-2.5-pro"

func baseEnv(home, baseURL string) []string {
	base := strings.TrimRight(baseURL, "/")
	return []string{
		"HOME=" + home,
		"XDG_CONFIG_HOME=" + filepath.Join(home, ".config"),
		"XDG_DATA_HOME=" + filepath.Join(home, ".local", "share"),
		"XDG_CACHE_HOME=" + filepath.Join(home, ".cache"),
		"XDG_STATE_HOME=" + filepath.Join(home, ".local", "state"),
		"HTTP_PROXY=" + base, "HTTPS_PROXY=" + base,
		"http_proxy=" + base, "https_proxy=" + base,
		"NO_PROXY=127.0.0.1,localhost,::1", "no_proxy=127.0.0.1,localhost,::1",
	}
}

// ClaudeEnv returns the environment for Claude Code: the Anthropic base URL
// and a dummy API key, no nonessential traffic (telemetry, error reporting,
// auto-update) and IS_SANDBOX=1, which lets --dangerously-skip-permissions
// run as root.
func ClaudeEnv(home, baseURL string) []string {
	return append(baseEnv(home, baseURL),
		"ANTHROPIC_BASE_URL="+strings.TrimRight(baseURL, "/"),
		"ANTHROPIC_API_KEY=dummy",
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1",
		"IS_SANDBOX=1",
	)
}

// CodexEnv writes $home/.codex/config.toml with a "modelserver" provider on
// the Responses API and returns CODEX_HOME and the provider's key variable
// STUB_API_KEY. Pass -c check_for_update_on_startup=false -c
// analytics.enabled=false --disable plugins --disable apps on the command
// line as well: the config sets the first two, the flags turn off plugins and
// apps, which otherwise reach out.
func CodexEnv(home, baseURL string) ([]string, error) {
	dir := filepath.Join(home, ".codex")
	cfg := fmt.Sprintf(`# Written by modelserver.CodexEnv: Codex against a local test double.
model = %q
model_provider = "modelserver"
check_for_update_on_startup = false

[analytics]
enabled = false

[model_providers.modelserver]
name = "modelserver"
base_url = %q
wire_api = "responses"
env_key = "STUB_API_KEY"
`, CodexModel, strings.TrimRight(baseURL, "/")+"/v1")
	if err := writeFile(filepath.Join(dir, "config.toml"), []byte(cfg)); err != nil {
		return nil, err
	}
	return append(baseEnv(home, baseURL), "CODEX_HOME="+dir, "STUB_API_KEY=dummy"), nil
}

// OpencodeEnv writes $home/opencode.json with a "stub"
// provider (the bundled @ai-sdk/openai-compatible package on the Chat
// Completions API) as the model and small model, and returns OPENCODE_CONFIG
// naming it and the OPENCODE_DISABLE_* variables that turn off the models.dev
// fetch, auto-update, LSP downloads and default plugins.
func OpencodeEnv(home, baseURL string) ([]string, error) {
	path := filepath.Join(home, "opencode.json")
	cfg := map[string]any{
		"$schema":     "https://opencode.ai/config.json",
		"model":       "stub/" + StubModel,
		"small_model": "stub/" + StubModel,
		"autoupdate":  false,
		"share":       "disabled",
		"provider": map[string]any{"stub": map[string]any{
			"npm":  "@ai-sdk/openai-compatible",
			"name": "modelserver",
			"options": map[string]any{
				"baseURL": strings.TrimRight(baseURL, "/") + "/v1",
				"apiKey":  "dummy",
			},
			"models": map[string]any{StubModel: map[string]any{"name": StubModel, "tool_call": true}},
		}},
	}
	b, _ := json.MarshalIndent(cfg, "", "  ")
	if err := writeFile(path, b); err != nil {
		return nil, err
	}
	return append(baseEnv(home, baseURL),
		"OPENCODE_CONFIG="+path,
		"OPENCODE_DISABLE_MODELS_FETCH=1",
		"OPENCODE_DISABLE_AUTOUPDATE=1",
		"OPENCODE_DISABLE_LSP_DOWNLOAD=1",
		"OPENCODE_DISABLE_DEFAULT_PLUGINS=1",
	), nil
}

// GeminiEnv writes $home/.gemini/settings.json (API-key auth, no usage
// statistics, no telemetry, no auto-update, the model pinned to [GeminiModel]) and returns
// GEMINI_API_KEY and GOOGLE_GEMINI_BASE_URL. Pass -m GeminiModel on the
// command line too: without a pinned model the router first asks a
// flash-lite model to classify the prompt.
func GeminiEnv(home, baseURL string) ([]string, error) {
	cfg := map[string]any{
		"security":  map[string]any{"auth": map[string]any{"selectedType": "gemini-api-key"}},
		"privacy":   map[string]any{"usageStatisticsEnabled": false},
		"telemetry": map[string]any{"enabled": false},
		"model":     map[string]any{"name": GeminiModel},
		"general":   map[string]any{"enableAutoUpdate": false, "enableAutoUpdateNotification": false},
	}
	b, _ := json.MarshalIndent(cfg, "", "  ")
	if err := writeFile(filepath.Join(home, ".gemini", "settings.json"), b); err != nil {
		return nil, err
	}
	return append(baseEnv(home, baseURL),
		"GEMINI_API_KEY=dummy",
		"GOOGLE_GEMINI_BASE_URL="+strings.TrimRight(baseURL, "/"),
	), nil
}

func writeFile(path string, data []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("modelserver: %w", err)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		return fmt.Errorf("modelserver: %w", err)
	}
	return nil
}
