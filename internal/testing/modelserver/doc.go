// Package modelserver is a test double for the model APIs that AI coding agent
// CLIs call. It is test code: it listens on the loopback interface only
// (127.0.0.1, a free port), runs no model, and answers every request from a
// script written in advance, so that tests can run the real Claude Code,
// Codex, opencode and Gemini CLI binaries fully offline.
//
// It serves, in the shapes those CLIs accept (see the agents reference,
// PART 2, section 2.5):
//
//   - Anthropic Messages: POST /v1/messages (with or without ?beta=true),
//     streamed as SSE when the request has "stream": true, else one JSON
//     message; POST /v1/messages/count_tokens.
//   - OpenAI Responses: POST /v1/responses (SSE), as used by Codex.
//   - OpenAI Chat Completions: POST /v1/chat/completions (SSE), as used by
//     opencode's openai-compatible provider.
//   - Gemini: POST /v1beta/models/{model}:streamGenerateContent?alt=sse,
//     :generateContent and :countTokens.
//   - Model lists: GET /v1/models (a list both OpenAI and Anthropic clients
//     read) and GET /v1beta/models (Gemini).
//
// # Script
//
// A script is a list of [Turn]s ([Text] and [Tool] build the common ones). Each completion request consumes the next
// turn; when the script runs out the last turn repeats. A turn is a final
// text, one shell tool call (which the CLI's own shell tool then runs), an
// HTTP error status, or an echo of the prompt; any of them may come after a
// Delay, as from a model that takes its time (requests wait side by side).
// The tool call uses the shell
// tool each CLI offers: "Bash" {"command"} for Claude Code, "exec_command"
// {"cmd"} for Codex, "bash" {"command","description"} for opencode and
// "run_shell_command" {"command"} for Gemini CLI.
//
// Rule for what consumes a turn: every POST to a completion endpoint
// (messages, responses, chat/completions, generateContent,
// streamGenerateContent) consumes one, including retries after an error
// status, except these auxiliary requests, which get a short fixed answer
// and leave the script alone:
//
//   - a Chat Completions request that offers no tools (opencode's session
//     title generation); the answer is the text [AuxiliaryText];
//   - a Gemini request in JSON mode (generationConfig.responseMimeType
//     "application/json": Gemini CLI's model router, next-speaker and loop
//     checks); the answer is a small JSON value that fits the request's
//     response schema, with the first value of every enum (the router picks
//     the first model listed, the next-speaker check gets "user"), 0 for a
//     number (no loop) and 1 for an integer (the router's score).
//
// Token counts, model lists and unknown paths never consume a turn.
//
// # Error turns with the real CLIs
//
// Observed with the pinned versions, one Status turn repeated:
//
//   - Claude Code retries a 429 rate_limit_error (CLAUDE_CODE_MAX_RETRIES=0
//     makes it one request), then prints a result with
//     "api_error_status":429 and exits 1. With the headers
//     anthropic-ratelimit-unified-status: rejected, -reset: <epoch> and
//     -representative-claim: five_hour, and CLAUDE_CODE_OAUTH_TOKEN in
//     place of ANTHROPIC_API_KEY, it does not retry: a rate_limit_event
//     with resetsAt, then the result, exit 1.
//   - Codex does not retry a 429 whose body has "type":"usage_limit_reached":
//     an error event and turn.failed ("You’ve hit your usage limit. ..."),
//     exit 1. A plain 429 is retried (5 times by default).
//   - opencode retries a 429 with backoff (7 requests in 40 s); with
//     "retry-after: 0" it gives up after 8 requests in about 4 s with an
//     error event, exit 1.
//   - Gemini CLI retries a 429 RESOURCE_EXHAUSTED for minutes; a body whose
//     error.details hold a google.rpc.QuotaFailure with a quotaId containing
//     "PerDay" is terminal: one request, exit 173.
//
// # Leaks
//
// The environment helpers ([ClaudeEnv], [CodexEnv], [OpencodeEnv],
// [GeminiEnv]) point HTTP_PROXY and HTTPS_PROXY at the server itself, with
// NO_PROXY covering the loopback addresses. A CLI that honors the proxy
// variables and tries to reach any other host (telemetry, update checks,
// package registries) sends a CONNECT or an absolute-URL request here; the
// server refuses it with 403 and records it with API "proxy", so a test can
// see that traffic instead of letting it out. Verified with the pinned CLIs
// (scripts/install-agents.sh): Claude Code, Codex and Gemini CLI try no
// other host; opencode 1.18.33 tries registry.npmjs.org:443 once (a
// background install of @opencode-ai/plugin into its config directory) and
// runs on when refused.
//
// TestRealCLIsTalkToTheServer runs each real CLI
// against a script of one tool call and one final text.
package modelserver
