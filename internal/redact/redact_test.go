package redact

import (
	"encoding/json"
	"strings"
	"testing"
)

const key = "sk-ant-api03-abcdefghijklmnop"

func TestRedactMasksSecretVariables(t *testing.T) {
	r := New([]string{
		"ANTHROPIC_API_KEY=" + key,
		"GITHUB_TOKEN=ghp_0123456789abcdef",
		"DB_PASSWORD=hunter2hunter2",
		"AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG",
		"MY_CUSTOM=custom-secret-value",
		"SHORT_TOKEN=abc",           // too short to mask safely
		"HOME=/home/someone/longer", // not a secret by name
	}, []string{"MY_CUSTOM"})
	in := "key " + key + " gh ghp_0123456789abcdef pw hunter2hunter2 aws wJalrXUtnFEMI/K7MDENG custom custom-secret-value short abc home /home/someone/longer"
	got := r.Redact(in)
	for _, secret := range []string{key, "ghp_0123456789abcdef", "hunter2hunter2", "wJalrXUtnFEMI/K7MDENG", "custom-secret-value"} {
		if strings.Contains(got, secret) {
			t.Errorf("Redact left %q in %q", secret, got)
		}
	}
	for _, keep := range []string{"short abc", "/home/someone/longer"} {
		if !strings.Contains(got, keep) {
			t.Errorf("Redact removed %q from %q", keep, got)
		}
	}
	if strings.Count(got, Mask) != 5 {
		t.Errorf("Redact = %q, want 5 masks", got)
	}
}

func TestRedactURLCredentials(t *testing.T) {
	var r *Redactor // nil still masks URL credentials
	tests := map[string]string{
		"fatal: could not read https://user:ghp_token123@github.com/o/r.git": "fatal: could not read https://user:" + Mask + "@github.com/o/r.git",
		"remote 'https://x-access-token:abc@host/p'":                         "remote 'https://x-access-token:" + Mask + "@host/p'",
		"no credentials in https://github.com/o/r and a@b.c":                 "no credentials in https://github.com/o/r and a@b.c",
		"ssh git@github.com:o/r.git":                                         "ssh git@github.com:o/r.git",
		"postgres://app:s3cr3t@db:5432/x":                                    "postgres://app:" + Mask + "@db:5432/x",
	}
	for in, want := range tests {
		if got := r.Redact(in); got != want {
			t.Errorf("Redact(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestWriterMasksSecretsSplitAcrossWrites(t *testing.T) {
	r := New([]string{"ANTHROPIC_API_KEY=" + key}, nil)
	var sb strings.Builder
	w := NewWriter(&sb, r)
	text := "line one\nthe key is " + key + " and a url https://u:pass1234@h/x\nlast line without newline " + key
	// Every split point, byte by byte, must give the same masked stream.
	for i := 0; i < len(text); i++ {
		sb.Reset()
		w = NewWriter(&sb, r)
		w.Write([]byte(text[:i]))
		w.Write([]byte(text[i:]))
		if err := w.Flush(); err != nil {
			t.Fatal(err)
		}
		if strings.Contains(sb.String(), key) || strings.Contains(sb.String(), "pass1234") {
			t.Fatalf("split at %d: secret written: %q", i, sb.String())
		}
		if !strings.HasPrefix(sb.String(), "line one\nthe key is "+Mask) {
			t.Fatalf("split at %d: got %q", i, sb.String())
		}
	}
}

func TestWriterBoundsAnEndlessLine(t *testing.T) {
	r := New([]string{"ANTHROPIC_API_KEY=" + key}, nil)
	var sb strings.Builder
	w := NewWriter(&sb, r)
	chunk := strings.Repeat("x", 1000)
	for i := 0; i < 200; i++ {
		w.Write([]byte(chunk))
	}
	w.Write([]byte(key))
	if len(w.buf) > maxHold {
		t.Errorf("held back %d bytes, want at most %d", len(w.buf), maxHold)
	}
	w.Flush()
	if strings.Contains(sb.String(), key) || len(sb.String()) != 200*1000+len(Mask) {
		t.Errorf("endless line not masked or not complete: %d bytes", len(sb.String()))
	}
}

func TestAddNamesExtendsDefault(t *testing.T) {
	old := osEnviron
	defer func() { osEnviron = old; extra = nil; defaultR = nil }()
	osEnviron = func() []string { return []string{"OPENAI_API_KEY=sk-openai-123456", "DEPLOY_CRED=deploy-cred-value"} }
	extra, defaultR = nil, nil
	if got := Default().Redact("sk-openai-123456 deploy-cred-value"); got != Mask+" deploy-cred-value" {
		t.Errorf("before AddNames: %q", got)
	}
	AddNames("DEPLOY_CRED")
	if got := Default().Redact("sk-openai-123456 deploy-cred-value"); got != Mask+" "+Mask {
		t.Errorf("after AddNames: %q", got)
	}
}

func TestJSONMasksSecretsInsideStrings(t *testing.T) {
	r := New([]string{"ANTHROPIC_API_KEY=" + key, `DB_PASSWORD=pw"with<quote>&amp`}, nil)
	doc := map[string]any{"criterion": "holds " + key, "nested": []any{map[string]any{"pw": `pw"with<quote>&amp`}},
		"url": "https://u:pass1234@h/x", "n": 3}
	b, _ := json.Marshal(doc)
	got := r.JSON(b)
	var back map[string]any
	if err := json.Unmarshal(got, &back); err != nil {
		t.Fatalf("JSON broke the document: %v\n%s", err, got)
	}
	for _, s := range []string{key, "with", "pass1234"} {
		if strings.Contains(string(got), s) {
			t.Errorf("JSON left %q in %s", s, got)
		}
	}
	if back["criterion"] != "holds "+Mask || back["n"] != 3.0 {
		t.Errorf("JSON = %s", got)
	}
}
