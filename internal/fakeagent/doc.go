// Package fakeagent is a scripted stand-in for an AI coding agent CLI, for
// tests and the "ralph demo" command only. No AI runs here: every line it
// prints and every file it touches comes from a scenario file written in
// advance.
//
// Main behaves like the main function of an agent process (Claude Code,
// Codex, ...). A test binary (through TestMain and an environment switch) or
// ralph's hidden demo command calls it as the process entry point. It:
//
//  1. reads the prompt: from the file named by --prompt-file PATH, else from
//     the last positional argument if that names an existing file, else from
//     all of stdin;
//  2. loads the scenario from the JSON file named by the FAKEAGENT_SCENARIO
//     environment variable;
//  3. picks an invocation: the first entry, in order, whose "match" substring
//     occurs in the prompt (or that has no match) and that still has uses
//     left ("times", 0 = unlimited). Use counts persist across processes in
//     "<scenario>.state.json", guarded by an flock on
//     "<scenario>.state.json.lock";
//  4. runs the invocation's steps in order in the current directory and exits
//     with the invocation's exit code (default 0).
//
// Scenario file:
//
//	{
//	  "format": "plain",            // "plain" (default) or "claude" (stream-json)
//	  "invocations": [
//	    {"match": "US-002", "times": 1, "steps": [ ... ], "exit": 0}
//	  ]
//	}
//
// Each step is an object with exactly one action key plus that action's options:
//
//	{"write": "path", "content": "text"}     create/overwrite (parents created)
//	{"append": "path", "content": "text"}    append (file created if missing)
//	{"replace": "path", "old": "x", "new": "y"}  first occurrence; old missing -> exit 4
//	{"check_story": "US-001", "prd": "prd.md"}   tick "### [ ] US-001" and its "- [ ]" lines;
//	                                          without "prd", the prompt line "PRD: <path>"
//	{"run": "cmd", "ignore_error": false}    sh -c in cwd, output to stderr; failure -> exit 5
//	{"commit": "msg", "ignore_error": false} git add -A; git commit -q -m msg; failure -> exit 5
//	{"say": "text"}                          one assistant message
//	{"tool": "Bash", "input": "ls", "output": "text"}  simulated tool call and result
//	{"echo_prompt": true}                    print the prompt (as Codex does)
//	{"stderr": "text"}                       print to stderr
//	{"sleep": "250ms"}                       time.ParseDuration
//	{"hang": true}                           sleep until killed
//	{"flood": 10485760, "newlines": true}    that many filler bytes to stdout, streamed
//	{"ignore_sigterm": true}                 ignore SIGTERM from now on
//	{"limit": "2026-11-22T10:40:00Z"}        a usage-limit report that resets at that time
//	{"final": "text"}                        the final assistant message (claude: plus result)
//	{"exit": 3}                              exit now with that code
//
// In "claude" format stdout carries Claude Code stream-json events, one per
// line, starting with a system/init event whose session_id is "fake-<n>" (n
// counts the invocations of the scenario) and ending with a result event.
// In "plain" format stdout carries plain text. A limit step does not end the
// process by itself: give the invocation "exit": 1, as real agents exit 1 on a
// limit. An exit step, or a failing step, ends the stream with no result
// event, like a crash.
//
// Exit codes of the fake itself: 2 bad prompt source or scenario, 3 no
// invocation matches, 4 a file step failed, 5 a run or commit step failed.
package fakeagent
