package state

import (
	"encoding/json"
	"errors"
	"reflect"
	"testing"
	"time"
)

func sampleTask(owner, id string, now time.Time) Task {
	return Task{ID: id, Owner: owner, Session: "main", Tool: "e2b_exec", SandboxID: "sbx1", PID: 42,
		LogFile: "/tmp/e2b-mcp/42.log", Head: json.RawMessage(`{"stdout":"started\n","running":true}`),
		Status: TaskWorking, Created: now, Updated: now, Expires: now.Add(time.Hour)}
}

func TestTasks(t *testing.T) {
	forEachStore(t, func(t *testing.T, k storeKind) {
		s, clock := k.newTestStore(t)
		now := clock.Now()
		task := sampleTask("alice", "task1", now)
		if err := s.PutTask(task); err != nil {
			t.Fatal(err)
		}
		got, err := s.Task("alice", "task1")
		if err != nil || !reflect.DeepEqual(got, task) {
			t.Fatalf("Task = %+v, %v; want %+v", got, err, task)
		}
		if _, err := s.Task("bob", "task1"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("bob reading alice's task: %v, want ErrNotFound", err)
		}
		if _, err := s.UpdateTask("bob", "task1", func(*Task) error { return nil }); !errors.Is(err, ErrNotFound) {
			t.Fatalf("bob updating alice's task: %v, want ErrNotFound", err)
		}

		clock.Advance(time.Minute)
		result := json.RawMessage(`{"content":[{"type":"text","text":"done"}],"isError":false}`)
		done, err := s.UpdateTask("alice", "task1", func(t *Task) error {
			t.Status, t.Result = TaskCompleted, result
			return nil
		})
		if err != nil || done.Status != TaskCompleted || !done.Updated.Equal(clock.Now()) || !done.Terminal() {
			t.Fatalf("UpdateTask = %+v, %v", done, err)
		}
		if got, err := s.Task("alice", "task1"); err != nil || !reflect.DeepEqual(got, done) {
			t.Fatalf("after UpdateTask, Task = %+v, %v; want %+v", got, err, done)
		}

		// A refused update writes nothing.
		if _, err := s.UpdateTask("alice", "task1", func(t *Task) error {
			t.Status = TaskCancelled
			return errors.New("no thanks")
		}); err == nil || err.Error() != "no thanks" {
			t.Fatalf("a refused update: %v", err)
		}
		if _, err := s.UpdateTask("alice", "task1", func(t *Task) error { t.Status = "paused"; return nil }); err == nil {
			t.Fatal("an unknown status was stored")
		}
		if _, err := s.UpdateTask("alice", "task1", func(t *Task) error { t.Result = json.RawMessage(`{`); return nil }); err == nil {
			t.Fatal("a result that is no JSON was stored")
		}
		if got, err := s.Task("alice", "task1"); err != nil || !reflect.DeepEqual(got, done) {
			t.Fatalf("after refused updates, Task = %+v, %v; want %+v", got, err, done)
		}

		// The owner's expired tasks go with the next task put, another owner's stay.
		if err := s.PutTask(sampleTask("bob", "task2", now)); err != nil {
			t.Fatal(err)
		}
		clock.Advance(time.Hour)
		if err := s.PutTask(sampleTask("alice", "task3", clock.Now())); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Task("alice", "task1"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("an expired task after the next put: %v, want ErrNotFound", err)
		}
		if _, err := s.Task("bob", "task2"); err != nil {
			t.Fatalf("another owner's expired task went: %v", err)
		}
		for _, bad := range []Task{
			{ID: "", Owner: "alice", Status: TaskWorking},
			{ID: "t", Owner: "", Status: TaskWorking},
			{ID: "t", Owner: "alice", Status: ""},
			{ID: "t", Owner: "alice", Status: TaskWorking, Head: json.RawMessage("not json")},
		} {
			if err := s.PutTask(bad); err == nil {
				t.Errorf("PutTask(%+v) was stored", bad)
			}
		}
	})
}
