package session

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ralphloop/ralph/internal/store"
)

var questionsT0 = time.Date(2025, 3, 1, 9, 0, 0, 0, time.UTC)

func questionIDs(qs []Question) []string {
	out := []string{}
	for _, q := range qs {
		out = append(out, q.ID)
	}
	return out
}

func TestQuestionLoadMissing(t *testing.T) {
	dir := t.TempDir()
	qs, err := LoadQuestions(dir)
	if qs != nil || err != nil {
		t.Errorf("LoadQuestions(empty folder) = %v, %v; want nil, nil", qs, err)
	}
	qs, err = LoadQuestions(filepath.Join(dir, "no-such-session"))
	if qs != nil || err != nil {
		t.Errorf("LoadQuestions(missing folder) = %v, %v; want nil, nil", qs, err)
	}
}

func TestQuestionAddAndLoad(t *testing.T) {
	dir := t.TempDir()
	added, err := AddQuestions(dir, "planner", []string{"  Which database?  ", "", "   ", "Deploy target?"}, questionsT0)
	if err != nil {
		t.Fatal(err)
	}
	want := []Question{
		{ID: "q-1", Text: "Which database?", AskedBy: "planner", AskedAt: questionsT0},
		{ID: "q-2", Text: "Deploy target?", AskedBy: "planner", AskedAt: questionsT0},
	}
	if !reflect.DeepEqual(added, want) {
		t.Fatalf("added = %+v, want %+v", added, want)
	}
	loaded, err := LoadQuestions(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(loaded, want) {
		t.Fatalf("loaded = %+v, want %+v", loaded, want)
	}
	for _, q := range loaded {
		if !q.Open() {
			t.Errorf("%s is not open", q.ID)
		}
	}

	// The file is versioned and leaves no temporary files behind.
	var head struct {
		SchemaVersion int `json:"schema_version"`
	}
	b, err := os.ReadFile(filepath.Join(dir, QuestionsFile))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &head); err != nil || head.SchemaVersion != QuestionsSchemaVersion {
		t.Errorf("schema_version = %d (%v), want %d", head.SchemaVersion, err, QuestionsSchemaVersion)
	}
	tmps, _ := filepath.Glob(filepath.Join(dir, "*.tmp"))
	if len(tmps) != 0 {
		t.Errorf("temporary files left: %v", tmps)
	}
}

func TestQuestionAddSkipsDuplicatesOfOpenQuestions(t *testing.T) {
	dir := t.TempDir()
	if _, err := AddQuestions(dir, "planner", []string{"Which database?"}, questionsT0); err != nil {
		t.Fatal(err)
	}
	added, err := AddQuestions(dir, "questioner", []string{" which DATABASE? ", "Which port?", "which port?"}, questionsT0.Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if got := questionIDs(added); !reflect.DeepEqual(got, []string{"q-2"}) || added[0].Text != "Which port?" || added[0].AskedBy != "questioner" {
		t.Errorf("added = %+v, want only q-2 Which port? by questioner", added)
	}

	// Nothing new: nothing added, nothing written.
	before, _ := os.Stat(filepath.Join(dir, QuestionsFile))
	added, err = AddQuestions(dir, "planner", []string{"WHICH PORT?", ""}, questionsT0.Add(2*time.Minute))
	if err != nil || len(added) != 0 {
		t.Errorf("AddQuestions(duplicates) = %+v, %v; want none, nil", added, err)
	}
	after, _ := os.Stat(filepath.Join(dir, QuestionsFile))
	if !before.ModTime().Equal(after.ModTime()) {
		t.Errorf("questions.json rewritten although nothing was added")
	}

	// Once answered, the same text may be asked again, under a new id.
	if _, err := AnswerQuestion(dir, "q-1", "Postgres", questionsT0.Add(3*time.Minute)); err != nil {
		t.Fatal(err)
	}
	added, err = AddQuestions(dir, "planner", []string{"Which database?"}, questionsT0.Add(4*time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if got := questionIDs(added); !reflect.DeepEqual(got, []string{"q-3"}) {
		t.Errorf("re-asking an answered question added %v, want [q-3]", got)
	}
}

func TestQuestionIDContinuity(t *testing.T) {
	dir := t.TempDir()
	if _, err := AddQuestions(dir, "planner", []string{"A?", "B?"}, questionsT0); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"q-1", "q-2"} {
		if _, err := AnswerQuestion(dir, id, "yes", questionsT0.Add(time.Minute)); err != nil {
			t.Fatal(err)
		}
	}
	added, err := AddQuestions(dir, "planner", []string{"C?"}, questionsT0.Add(2*time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if got := questionIDs(added); !reflect.DeepEqual(got, []string{"q-3"}) {
		t.Errorf("after answering all, new ids = %v, want [q-3]", got)
	}

	// An id is not reused even when questions were removed from the file
	// by hand: the highest id ever given is remembered.
	path := filepath.Join(dir, QuestionsFile)
	var doc questionsDoc
	if _, err := store.ReadJSON(path, QuestionsSchemaVersion, &doc); err != nil {
		t.Fatal(err)
	}
	doc.Questions = doc.Questions[:1]
	if err := store.WriteJSON(path, doc); err != nil {
		t.Fatal(err)
	}
	added, err = AddQuestions(dir, "planner", []string{"D?"}, questionsT0.Add(3*time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if got := questionIDs(added); !reflect.DeepEqual(got, []string{"q-4"}) {
		t.Errorf("after removing questions by hand, new ids = %v, want [q-4]", got)
	}
}

func TestQuestionIDFromFileWithoutLastID(t *testing.T) {
	// A file written by hand, without last_id, still continues its ids.
	dir := t.TempDir()
	doc := `{"schema_version": 1, "questions": [{"id": "q-7", "text": "X?", "asked_by": "planner", "asked_at": "2025-03-01T09:00:00Z"}]}`
	if err := os.WriteFile(filepath.Join(dir, QuestionsFile), []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	added, err := AddQuestions(dir, "planner", []string{"Y?"}, questionsT0)
	if err != nil {
		t.Fatal(err)
	}
	if got := questionIDs(added); !reflect.DeepEqual(got, []string{"q-8"}) {
		t.Errorf("new ids = %v, want [q-8]", got)
	}
}

func TestQuestionAnswer(t *testing.T) {
	dir := t.TempDir()
	if _, err := AddQuestions(dir, "planner", []string{"Which database?", "Deploy target?"}, questionsT0); err != nil {
		t.Fatal(err)
	}
	at := questionsT0.Add(90 * time.Minute)
	q, err := AnswerQuestion(dir, " q-2 ", "  Fly.io  ", at)
	if err != nil {
		t.Fatal(err)
	}
	if q.ID != "q-2" || q.Answer != "Fly.io" || q.AnsweredAt == nil || !q.AnsweredAt.Equal(at) || q.Open() {
		t.Errorf("answered = %+v", q)
	}

	// Persisted across Load.
	qs, err := LoadQuestions(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(qs) != 2 || qs[1].Answer != "Fly.io" || qs[1].AnsweredAt == nil || !qs[1].AnsweredAt.Equal(at) {
		t.Fatalf("loaded = %+v", qs)
	}
	if got := questionIDs(OpenQuestions(qs)); !reflect.DeepEqual(got, []string{"q-1"}) {
		t.Errorf("open = %v, want [q-1]", got)
	}
}

func TestQuestionAnswerErrors(t *testing.T) {
	dir := t.TempDir()

	// No questions at all.
	_, err := AnswerQuestion(dir, "q-1", "yes", questionsT0)
	if err == nil || !strings.Contains(err.Error(), `no question "q-1"`) || !strings.Contains(err.Error(), "no question is waiting") {
		t.Errorf("answer with no questions: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, QuestionsFile)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a failed answer created questions.json")
	}
	missing := filepath.Join(dir, "no-such-session")
	if _, err := AnswerQuestion(missing, "q-1", "yes", questionsT0); err == nil || !strings.Contains(err.Error(), "no question is waiting") {
		t.Errorf("answer in a missing folder: %v", err)
	}
	if _, err := os.Stat(missing); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("answering in a missing folder created it")
	}

	if _, err := AddQuestions(dir, "planner", []string{"A?", "B?", "C?"}, questionsT0); err != nil {
		t.Fatal(err)
	}
	answeredAt := time.Date(2025, 3, 1, 9, 30, 15, 0, time.UTC)
	if _, err := AnswerQuestion(dir, "q-2", "b", answeredAt); err != nil {
		t.Fatal(err)
	}

	// Empty answer.
	_, err = AnswerQuestion(dir, "q-1", "  \n ", questionsT0)
	if err == nil || !strings.Contains(err.Error(), "empty") || !strings.Contains(err.Error(), "give the answer") {
		t.Errorf("empty answer: %v", err)
	}

	// Unknown id lists the open ids only.
	_, err = AnswerQuestion(dir, "q-9", "x", questionsT0)
	if err == nil || !strings.Contains(err.Error(), `no question "q-9"`) || !strings.Contains(err.Error(), "q-1, q-3") || strings.Contains(err.Error(), "q-2") {
		t.Errorf("unknown id: %v", err)
	}

	// Already answered: says when, and that the answer stands.
	_, err = AnswerQuestion(dir, "q-2", "changed my mind", questionsT0.Add(time.Hour))
	if err == nil || !strings.Contains(err.Error(), "already answered at 2025-03-01 09:30:15 UTC") || !strings.Contains(err.Error(), "stands") {
		t.Errorf("already answered: %v", err)
	}
	qs, err := LoadQuestions(dir)
	if err != nil {
		t.Fatal(err)
	}
	if qs[1].Answer != "b" || !qs[1].AnsweredAt.Equal(answeredAt) || qs[0].Answer != "" || !qs[0].Open() {
		t.Errorf("a refused answer changed the file: %+v", qs)
	}

	// All answered: unknown id says there are none open.
	for _, id := range []string{"q-1", "q-3"} {
		if _, err := AnswerQuestion(dir, id, "ok", questionsT0); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := AnswerQuestion(dir, "q-4", "x", questionsT0); err == nil || !strings.Contains(err.Error(), "no question is waiting") {
		t.Errorf("unknown id with none open: %v", err)
	}
}

func TestQuestionNewerSchemaRefused(t *testing.T) {
	dir := t.TempDir()
	doc := `{"schema_version": 99, "questions": []}`
	if err := os.WriteFile(filepath.Join(dir, QuestionsFile), []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	var se *store.SchemaError
	if _, err := LoadQuestions(dir); !errors.As(err, &se) {
		t.Errorf("LoadQuestions(newer schema) = %v, want *store.SchemaError", err)
	}
	if _, err := AddQuestions(dir, "planner", []string{"A?"}, questionsT0); !errors.As(err, &se) {
		t.Errorf("AddQuestions(newer schema) = %v, want *store.SchemaError", err)
	}
	b, _ := os.ReadFile(filepath.Join(dir, QuestionsFile))
	if string(b) != doc {
		t.Errorf("a newer file was rewritten: %s", b)
	}
}

func TestQuestionOpenQuestions(t *testing.T) {
	at := questionsT0
	qs := []Question{{ID: "q-1"}, {ID: "q-2", Answer: "x", AnsweredAt: &at}, {ID: "q-3"}}
	if got := questionIDs(OpenQuestions(qs)); !reflect.DeepEqual(got, []string{"q-1", "q-3"}) {
		t.Errorf("OpenQuestions = %v", got)
	}
	if got := OpenQuestions(nil); len(got) != 0 {
		t.Errorf("OpenQuestions(nil) = %v", got)
	}
}

func TestQuestionConcurrentAddsKeepEveryQuestion(t *testing.T) {
	dir := t.TempDir()
	const n = 8
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := AddQuestions(dir, "planner", []string{"Question " + string(rune('A'+i)) + "?"}, questionsT0)
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	qs, err := LoadQuestions(dir)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, q := range qs {
		seen[q.ID] = true
	}
	if len(qs) != n || len(seen) != n {
		t.Errorf("after %d concurrent adds: %d questions, %d distinct ids: %v", n, len(qs), len(seen), questionIDs(qs))
	}
}
