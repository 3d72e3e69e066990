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
	s.mu.Lock()
	fresh := s.closedHere[storyID]
	s.mu.Unlock()
	// An issue this process closed has no comment of ralph's since: no
	// bd comments to read.
	if key != "" && !fresh {
		comments, err := s.client.Comments(ctx, storyID)
		if err == nil {
			for _, c := range comments {
				if strings.Contains(c.Text, key) {
					return nil
				}
			}
		}
	}
	if err := s.client.Comment(ctx, storyID, strings.TrimSpace(summary)); err != nil {
		return err
	}
	// From now on the issue holds a comment: a second Audit (COMMIT
	// again) reads them.
	s.mu.Lock()
	delete(s.closedHere, storyID)
	s.mu.Unlock()
	return nil
}
