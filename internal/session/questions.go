package session

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/gofrs/flock"

	"github.com/ralphloop/ralph/internal/store"
)

// QuestionsSchemaVersion is the version of questions.json this ralph
// writes.
const QuestionsSchemaVersion = 1

// QuestionsFile is the name of the question queue in a session folder.
const QuestionsFile = "questions.json"

// Question is a question only a person can answer, queued by a role. A
// question is open until it has an answer; an answer, once given, stands
// and is never replaced.
type Question struct {
	// ID is "q-1", "q-2", ...; an id is never reused within a session,
	// even after its question is answered.
	ID      string    `json:"id"`
	Text    string    `json:"text"`
	AskedBy string    `json:"asked_by"` // role name
	AskedAt time.Time `json:"asked_at"`
	// Answer and AnsweredAt are set together, by AnswerQuestion.
	Answer     string     `json:"answer,omitempty"`
	AnsweredAt *time.Time `json:"answered_at,omitempty"`
}

// Open reports whether the question still waits for an answer.
func (q Question) Open() bool { return q.AnsweredAt == nil }

// questionsDoc is questions.json. LastID is the highest id number ever
// given, so that ids stay unique even if questions were removed from the
// file by hand.
type questionsDoc struct {
	SchemaVersion int        `json:"schema_version"`
	LastID        int        `json:"last_id"`
	Questions     []Question `json:"questions"`
}

func questionsPath(dir string) string { return filepath.Join(dir, QuestionsFile) }

// LoadQuestions reads the question queue of the session folder dir, in the
// order the questions were asked. A missing file is no questions and no
// error.
func LoadQuestions(dir string) ([]Question, error) {
	doc, err := loadQuestionsDoc(dir)
	return doc.Questions, err
}

func loadQuestionsDoc(dir string) (questionsDoc, error) {
	var doc questionsDoc
	_, err := store.ReadJSON(questionsPath(dir), QuestionsSchemaVersion, &doc)
	if errors.Is(err, os.ErrNotExist) {
		return questionsDoc{}, nil
	}
	if err != nil {
		return questionsDoc{}, err
	}
	for _, q := range doc.Questions {
		doc.LastID = max(doc.LastID, idNumber(q.ID))
	}
	return doc, nil
}

// idNumber is n for an id "q-n", and 0 for anything else.
func idNumber(id string) int {
	s, ok := strings.CutPrefix(id, "q-")
	if !ok {
		return 0
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 {
		return 0
	}
	return n
}

// updateQuestions runs fn on the queue of dir and writes the result
// atomically when fn reports a change. It holds an advisory lock on
// questions.json.lock throughout, so that a person answering from another
// process and a session adding questions cannot lose each other's write.
func updateQuestions(dir string, fn func(*questionsDoc) (changed bool, err error)) error {
	lock := flock.New(questionsPath(dir) + ".lock")
	if err := lock.Lock(); err != nil {
		return fmt.Errorf("lock %s: %w", lock.Path(), err)
	}
	defer lock.Unlock()
	doc, err := loadQuestionsDoc(dir)
	if err != nil {
		return err
	}
	changed, err := fn(&doc)
	if err != nil || !changed {
		return err
	}
	doc.SchemaVersion = QuestionsSchemaVersion
	return store.WriteJSON(questionsPath(dir), doc)
}

// AddQuestions queues texts, asked by the role askedBy, in the session
// folder dir and returns the questions it added, in order. Texts are
// trimmed; empty ones are skipped, and so is a text equal (ignoring case
// and surrounding space) to a question that is still open, including one
// added earlier in the same call. New ids continue after the highest id
// ever given. Nothing is written when nothing is added.
func AddQuestions(dir, askedBy string, texts []string, now time.Time) ([]Question, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	var added []Question
	err := updateQuestions(dir, func(doc *questionsDoc) (bool, error) {
		open := map[string]bool{}
		for _, q := range doc.Questions {
			if q.Open() {
				open[questionKey(q.Text)] = true
			}
		}
		for _, t := range texts {
			t = strings.TrimSpace(t)
			if t == "" || open[questionKey(t)] {
				continue
			}
			open[questionKey(t)] = true
			doc.LastID++
			q := Question{ID: "q-" + strconv.Itoa(doc.LastID), Text: t, AskedBy: askedBy, AskedAt: now.UTC()}
			doc.Questions = append(doc.Questions, q)
			added = append(added, q)
		}
		return len(added) > 0, nil
	})
	if err != nil {
		return nil, err
	}
	return added, nil
}

func questionKey(text string) string { return strings.ToLower(strings.TrimSpace(text)) }

// AnswerQuestion records answer to the question id of the session folder
// dir and returns the answered question. It refuses an empty answer, an
// unknown id (naming the open ids) and a question already answered: an
// answer stands once given, because the planner may already have acted on
// it.
func AnswerQuestion(dir, id, answer string, now time.Time) (Question, error) {
	id, answer = strings.TrimSpace(id), strings.TrimSpace(answer)
	if answer == "" {
		return Question{}, fmt.Errorf("the answer to %s is empty: give the answer text", id)
	}
	if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
		return Question{}, unknownQuestion(id, nil)
	}
	var out Question
	err := updateQuestions(dir, func(doc *questionsDoc) (bool, error) {
		for i := range doc.Questions {
			q := &doc.Questions[i]
			if q.ID != id {
				continue
			}
			if !q.Open() {
				return false, fmt.Errorf("question %s was already answered at %s: that answer stands; ask a new question if it needs to change",
					id, q.AnsweredAt.UTC().Format("2006-01-02 15:04:05 UTC"))
			}
			t := now.UTC()
			q.Answer, q.AnsweredAt = answer, &t
			out = *q
			return true, nil
		}
		return false, unknownQuestion(id, OpenQuestions(doc.Questions))
	})
	if err != nil {
		return Question{}, err
	}
	return out, nil
}

func unknownQuestion(id string, open []Question) error {
	if len(open) == 0 {
		return fmt.Errorf("there is no question %q, and no question is waiting for an answer", id)
	}
	ids := make([]string, len(open))
	for i, q := range open {
		ids[i] = q.ID
	}
	return fmt.Errorf("there is no question %q: answer one of the open questions, %s", id, strings.Join(ids, ", "))
}

// OpenQuestions returns the questions of qs that wait for an answer, in
// their order. It returns a new slice and leaves qs untouched.
func OpenQuestions(qs []Question) []Question {
	var open []Question
	for _, q := range qs {
		if q.Open() {
			open = append(open, q)
		}
	}
	return open
}
