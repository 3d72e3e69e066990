package tasks

import (
	"context"
	"strings"
)

// Audit leaves the iteration's summary (task id, agent, duration, checks
// passed, commit hash) as a comment on the issue (bd comments add). The
// loop calls it after COMMIT's git commit (loop.Auditor).
//
// It is idempotent for key (the run and iteration, which the summary
// contains): COMMIT runs again after a crash between the git commit and
// the comment, and an issue that already has a comment with key gets no
// second one.
func (s *BeadsSource) Audit(ctx context.Context, taskID, key, summary string) error {
	storyID, _ := ParseTaskID(taskID)
	if key != "" {
		comments, err := s.client.Comments(ctx, storyID)
		if err == nil {
			for _, c := range comments {
				if strings.Contains(c.Text, key) {
					return nil
				}
			}
		}
	}
	return s.client.Comment(ctx, storyID, strings.TrimSpace(summary))
}
