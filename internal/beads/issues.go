package beads

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/ralphloop/ralph/internal/text"
)

// Statuses bd knows out of the box.
const (
	StatusOpen       = "open"
	StatusInProgress = "in_progress"
	StatusBlocked    = "blocked"
	StatusDeferred   = "deferred"
	StatusClosed     = "closed"
	StatusPinned     = "pinned"
	StatusHooked     = "hooked"
)

// Issue is one bd issue as its --json commands print it; fields ralph does
// not use are ignored, missing ones stay zero.
type Issue struct {
	ID                 string       `json:"id"`
	Title              string       `json:"title"`
	Description        string       `json:"description"`
	AcceptanceCriteria string       `json:"acceptance_criteria"`
	Status             string       `json:"status"`
	Priority           int          `json:"priority"`
	IssueType          string       `json:"issue_type"`
	Assignee           string       `json:"assignee"`
	Labels             []string     `json:"labels"`
	Parent             string       `json:"parent"`
	Ephemeral          bool         `json:"ephemeral"`
	CloseReason        string       `json:"close_reason"`
	Dependencies       []Dependency `json:"dependencies"`
	// BlockedBy is set by `bd blocked`: the open issues this one waits on.
	BlockedBy []string `json:"blocked_by"`
	// Comments is set by `bd show --include-comments` on some releases.
	Comments []Comment `json:"comments"`
}

// Dependency is one entry of an issue's "dependencies": an edge
// (issue_id, depends_on_id, type) in list and ready output, or the full
// depended-on issue plus "dependency_type" in show output.
type Dependency struct {
	IssueID        string `json:"issue_id"`
	DependsOnID    string `json:"depends_on_id"`
	Type           string `json:"type"`
	ID             string `json:"id"`
	Status         string `json:"status"`
	DependencyType string `json:"dependency_type"`
}

// Target is the id of the issue depended on.
func (d Dependency) Target() string {
	if d.DependsOnID != "" {
		return d.DependsOnID
	}
	return d.ID
}

// Kind is the dependency type ("blocks" when bd gave none).
func (d Dependency) Kind() string {
	switch {
	case d.DependencyType != "":
		return d.DependencyType
	case d.Type != "":
		return d.Type
	}
	return "blocks"
}

// Blocking reports whether the dependency holds back ready work (bd's
// AffectsReadyWork).
func (d Dependency) Blocking() bool {
	switch d.Kind() {
	case "blocks", "parent-child", "conditional-blocks", "waits-for":
		return true
	}
	return false
}

// Comment is one comment on an issue.
type Comment struct {
	ID      json.RawMessage `json:"id"`
	IssueID string          `json:"issue_id"`
	Author  string          `json:"author"`
	Text    string          `json:"text"`
}

// UnmarshalJSON accepts a priority written as a number, "2" or "P2".
func (i *Issue) UnmarshalJSON(b []byte) error {
	type plain Issue
	var aux struct {
		plain
		Priority json.RawMessage `json:"priority"`
	}
	if err := json.Unmarshal(b, &aux); err != nil {
		return err
	}
	*i = Issue(aux.plain)
	i.Priority = 2
	if len(aux.Priority) > 0 && string(aux.Priority) != "null" {
		var n int
		if json.Unmarshal(aux.Priority, &n) == nil {
			i.Priority = n
		} else {
			var s string
			if json.Unmarshal(aux.Priority, &s) == nil {
				if n, err := strconv.Atoi(strings.TrimPrefix(strings.ToUpper(s), "P")); err == nil {
					i.Priority = n
				}
			}
		}
	}
	return nil
}

// Prime runs `bd prime` and returns the workflow context it prints (bd
// itself uses .beads/PRIME.md instead when that file exists).
func (c *Client) Prime(ctx context.Context) (string, error) {
	out, err := c.run(ctx, "prime")
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(out)), nil
}

// ReadyOptions narrows `bd ready`.
type ReadyOptions struct {
	// Mol keeps the work inside one molecule (bd ready --mol).
	Mol string
	// Limit is the most issues returned; 0 means all.
	Limit int
	// IncludeEphemeral also lists wisps.
	IncludeEphemeral bool
}

// Ready returns the issues that can be worked on now, best first.
func (c *Client) Ready(ctx context.Context, o ReadyOptions) ([]Issue, error) {
	args := []string{"ready", "--limit", strconv.Itoa(o.Limit)}
	if o.Mol != "" {
		args = append(args, "--mol", o.Mol)
	}
	if o.IncludeEphemeral && o.Mol == "" {
		args = append(args, "--include-ephemeral")
	}
	p, err := c.runJSON(ctx, args...)
	if err != nil {
		return nil, err
	}
	return decodeReady(p)
}

// decodeReady reads plain ready output (an array of issues) or the
// molecule form {"molecule_id":...,"steps":[{"issue":{...},"parallel_info":
// {"is_ready":...}}]}, of which it keeps the steps that are ready ("steps"
// is null once no step is ready).
func decodeReady(p json.RawMessage) ([]Issue, error) {
	var obj struct {
		MoleculeID string `json:"molecule_id"`
		Steps      []struct {
			Issue        *Issue `json:"issue"`
			ParallelInfo *struct {
				IsReady *bool `json:"is_ready"`
			} `json:"parallel_info"`
		} `json:"steps"`
	}
	if t := strings.TrimSpace(string(p)); strings.HasPrefix(t, "{") && json.Unmarshal(p, &obj) == nil && (obj.Steps != nil || obj.MoleculeID != "") {
		// A finished molecule has "steps": null and nothing is ready.
		var out []Issue
		for _, s := range obj.Steps {
			if s.Issue == nil {
				continue
			}
			if s.ParallelInfo != nil && s.ParallelInfo.IsReady != nil && !*s.ParallelInfo.IsReady {
				continue
			}
			out = append(out, *s.Issue)
		}
		return out, nil
	}
	return decodeList[Issue](p, "issues", "ready")
}

// List returns issues: all of them, closed ones included, when all is set
// (bd list --all --limit 0), else the open ones.
func (c *Client) List(ctx context.Context, all bool, extra ...string) ([]Issue, error) {
	args := []string{"list", "--limit", "0"}
	if all {
		args = append(args, "--all")
	}
	args = append(args, extra...)
	p, err := c.runJSON(ctx, args...)
	if err != nil {
		return nil, err
	}
	return decodeList[Issue](p, "issues")
}

// Blocked returns the open issues held back by open blockers, with
// BlockedBy set.
func (c *Client) Blocked(ctx context.Context) ([]Issue, error) {
	p, err := c.runJSON(ctx, "blocked")
	if err != nil {
		return nil, err
	}
	return decodeList[Issue](p, "issues")
}

// Show returns one issue in detail.
func (c *Client) Show(ctx context.Context, id string) (Issue, error) {
	p, err := c.runJSON(ctx, "show", id)
	if err != nil {
		return Issue{}, err
	}
	list, err := decodeList[Issue](p, "issues")
	if err != nil {
		return Issue{}, err
	}
	for _, is := range list {
		if is.ID == id {
			return is, nil
		}
	}
	if len(list) == 1 {
		return list[0], nil
	}
	return Issue{}, fmt.Errorf("bd show %s: no such issue in the answer", id)
}

// Claim assigns the issue to the actor and sets it in progress (bd update
// --claim, idempotent).
func (c *Client) Claim(ctx context.Context, id string) error {
	_, err := c.runJSON(ctx, "update", id, "--claim")
	return err
}

// SetAcceptance replaces an issue's acceptance criteria (bd update ID
// --acceptance TEXT).
func (c *Client) SetAcceptance(ctx context.Context, id, text string) error {
	_, err := c.runJSON(ctx, "update", id, "--acceptance", text)
	return err
}

// SetStatus sets an issue's status (bd update ID --status=S).
func (c *Client) SetStatus(ctx context.Context, id, status string) error {
	_, err := c.runJSON(ctx, "update", id, "--status="+status)
	return err
}

// Close closes an issue with a reason.
func (c *Client) Close(ctx context.Context, id, reason string) error {
	_, err := c.runJSON(ctx, "close", id, "--reason", reason)
	return err
}

// Comment adds a comment to an issue (bd comments add).
func (c *Client) Comment(ctx context.Context, id, text string) error {
	_, err := c.runJSON(ctx, "comments", "add", id, text)
	return err
}

// Comments lists an issue's comments, oldest first.
func (c *Client) Comments(ctx context.Context, id string) ([]Comment, error) {
	p, err := c.runJSON(ctx, "comments", id)
	if err != nil {
		return nil, err
	}
	return decodeList[Comment](p, "comments")
}

// CreateOptions describes a new issue.
type CreateOptions struct {
	Title       string
	Description string
	Type        string
	Priority    int // -1 leaves bd's default
	Parent      string
	Deps        []string
	Labels      []string
	Acceptance  string
	// Ephemeral makes a wisp: local only, never exported.
	Ephemeral bool
}

// Create creates an issue and returns it.
func (c *Client) Create(ctx context.Context, o CreateOptions) (Issue, error) {
	args := []string{"create", "--title", o.Title}
	if o.Description != "" {
		args = append(args, "--description", o.Description)
	}
	if o.Type != "" {
		args = append(args, "--type", o.Type)
	}
	if o.Priority >= 0 {
		args = append(args, "--priority", strconv.Itoa(o.Priority))
	}
	if o.Parent != "" {
		args = append(args, "--parent", o.Parent)
	}
	if len(o.Deps) > 0 {
		args = append(args, "--deps", strings.Join(o.Deps, ","))
	}
	if len(o.Labels) > 0 {
		args = append(args, "--labels", strings.Join(o.Labels, ","))
	}
	if o.Acceptance != "" {
		args = append(args, "--acceptance", o.Acceptance)
	}
	if o.Ephemeral {
		args = append(args, "--ephemeral")
	}
	p, err := c.runJSON(ctx, args...)
	if err != nil {
		return Issue{}, err
	}
	list, err := decodeList[Issue](p, "issue", "issues")
	if err != nil {
		return Issue{}, err
	}
	if len(list) == 0 || list[0].ID == "" {
		return Issue{}, fmt.Errorf("bd create: no id in the answer: %s", text.Clip(string(p), 200))
	}
	return list[0], nil
}

// PourResult is what `bd mol pour` reports.
type PourResult struct {
	NewEpicID string            `json:"new_epic_id"`
	Created   int               `json:"created"`
	IDMapping map[string]string `json:"id_mapping"`
	Phase     string            `json:"phase"`
}

// MolPour instantiates a proto (a formula or a template epic) as a
// molecule and returns its root id.
func (c *Client) MolPour(ctx context.Context, proto string, vars map[string]string) (PourResult, error) {
	args := []string{"mol", "pour", proto}
	for k, v := range vars {
		args = append(args, "--var", k+"="+v)
	}
	p, err := c.runJSON(ctx, args...)
	if err != nil {
		return PourResult{}, err
	}
	var r PourResult
	if err := json.Unmarshal(p, &r); err != nil {
		return r, fmt.Errorf("bd mol pour: %w", err)
	}
	if r.NewEpicID == "" {
		return r, fmt.Errorf("bd mol pour %s: no new_epic_id in the answer: %s", proto, text.Clip(string(p), 200))
	}
	return r, nil
}

// Progress is `bd mol progress`.
type Progress struct {
	MoleculeID    string  `json:"molecule_id"`
	MoleculeTitle string  `json:"molecule_title"`
	Completed     int     `json:"completed"`
	InProgress    int     `json:"in_progress"`
	Total         int     `json:"total"`
	Percent       float64 `json:"percent"`
	CurrentStepID string  `json:"current_step_id"`
}

// MolProgress reports how far a molecule is.
func (c *Client) MolProgress(ctx context.Context, id string) (Progress, error) {
	p, err := c.runJSON(ctx, "mol", "progress", id)
	if err != nil {
		return Progress{}, err
	}
	list, err := decodeList[Progress](p, "molecules")
	if err != nil || len(list) == 0 {
		return Progress{}, fmt.Errorf("bd mol progress %s: unexpected answer %s", id, text.Clip(string(p), 200))
	}
	return list[0], nil
}

// Current is one molecule of `bd mol current`.
type Current struct {
	MoleculeID    string `json:"molecule_id"`
	MoleculeTitle string `json:"molecule_title"`
	NextStep      *Issue `json:"next_step"`
	Steps         []struct {
		Issue     Issue  `json:"issue"`
		Status    string `json:"status"`
		IsCurrent bool   `json:"is_current"`
	} `json:"steps"`
}

// MolCurrent reports where a molecule stands: its steps and the next one.
func (c *Client) MolCurrent(ctx context.Context, id string) ([]Current, error) {
	p, err := c.runJSON(ctx, "mol", "current", id)
	if err != nil {
		return nil, err
	}
	return decodeList[Current](p, "molecules")
}

// MolBurn deletes a molecule or wisp and its steps without a trace.
func (c *Client) MolBurn(ctx context.Context, id string) error {
	_, err := c.runJSON(ctx, "mol", "burn", id, "--force")
	return err
}
