package role

// The roles of a seed-002 session. Each is one headless agent run whose
// final message ends with a JSON result that ralph parses (see ParseResult);
// ralph, not the agent, acts on it.
const (
	Planner    = "planner"
	Questioner = "questioner"
	Executor   = "executor"
	Reviewer   = "reviewer"
	GoalCheck  = "goal-check"
)

// Planner modes (seed 002).
const (
	ModeInitialize   = "INITIALIZE"
	ModeUpdate       = "UPDATE"
	ModeQACoordinate = "QA_COORDINATE"
)

// Statuses a role may report.
const (
	StatusCompleted    = "completed"
	StatusNeedsQACycle = "needs_qa_cycle"
	StatusBlocked      = "blocked"
	StatusPassed       = "passed"
	StatusFailed       = "failed"
)

// Reviewer verdicts.
const (
	VerdictQualified = "Qualified"
	VerdictFailed    = "Failed"
)

// NewTask is a task a role asks ralph to add to the session's tasks.md.
type NewTask struct {
	Title    string   `json:"title"`
	Criteria []string `json:"criteria,omitempty"`
}

// Answer is the questioner's answer to one of the planner's questions.
type Answer struct {
	Question string `json:"question"`
	Answer   string `json:"answer"`
}

// Result is the parsed JSON result of one role run. Which fields are
// required depends on the role; ParseResult checks them.
type Result struct {
	// Status: planner completed|needs_qa_cycle|blocked; executor
	// completed|blocked; goal-check passed|failed. Empty for the
	// questioner and the reviewer.
	Status string `json:"status,omitempty"`
	// Verdict: reviewer Qualified|Failed.
	Verdict string `json:"verdict,omitempty"`
	// Summary is one paragraph on what the role did or found.
	Summary string `json:"summary,omitempty"`
	// Tasks is the planner's task list (completed status); ralph writes
	// tasks.md from it.
	Tasks []NewTask `json:"tasks,omitempty"`
	// Questions are the planner's open questions (needs_qa_cycle).
	Questions []string `json:"questions,omitempty"`
	// Answers are the questioner's answers from the code and the spec.
	Answers []Answer `json:"answers,omitempty"`
	// HumanQuestions are questions only a person can answer; ralph queues
	// them instead of letting an agent guess.
	HumanQuestions []string `json:"human_questions,omitempty"`
	// Blockers say why the role could not go on (blocked status).
	Blockers []string `json:"blockers,omitempty"`
	// Reasons are the reviewer's or goal check's reasons.
	Reasons []string `json:"reasons,omitempty"`
	// NewTasks is work discovered by the executor, reviewer or goal check.
	NewTasks []NewTask `json:"new_tasks,omitempty"`
	// NewRequirements is set by an executor that found the plan itself
	// must change; ralph goes back to planning (UPDATE).
	NewRequirements bool `json:"new_requirements,omitempty"`
}
