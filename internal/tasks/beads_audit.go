package tasks

import (
	"context"
	"strings"
)

// Audit leaves the iteration's summary (task id, agent, duration, checks
// passed, commit hash) as a comment on the issue (bd comments add). The
// loop calls it after COMMIT's git commit (loop.Auditor).
func (s *BeadsSource) Audit(ctx context.Context, taskID, summary string) error {
	storyID, _ := ParseTaskID(taskID)
	return s.client.Comment(ctx, storyID, strings.TrimSpace(summary))
}
