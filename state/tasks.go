package state

import (
	"encoding/json"
	"fmt"
	"time"
)

// Task is a tool call answered as a task of MCP's Tasks extension (io.modelcontextprotocol/tasks): the call
// ended its wait with its command still running, and the client follows it with tasks/get. The record holds what
// any server sharing the store needs to answer for it after a restart or on another replica: where the command
// runs and writes its output, and, once it ended, the call's result.
type Task struct {
	ID, Owner, Session string
	// Tool is the tool whose call the task is.
	Tool string
	// SandboxID, PID and LogFile are the command: the sandbox it runs in, its pid there, and the file in the
	// sandbox that receives its output. A task with no PID is a call that the server running it holds.
	SandboxID string
	PID       uint32
	LogFile   string
	// Head is the call's structured result when it became a task (the output until then).
	Head json.RawMessage
	// Status is one of the Task* statuses; StatusMessage says more of it.
	Status        string
	StatusMessage string
	// Result is the call's result (a CallToolResult's JSON) once Status is TaskCompleted, or its JSON-RPC error
	// once it is TaskFailed.
	Result json.RawMessage

	Created, Updated time.Time
	// Expires is when the task may be forgotten (its TTL from Created).
	Expires time.Time
}

// The statuses of a task, as the Tasks extension names them.
const (
	TaskWorking   = "working"
	TaskCompleted = "completed"
	TaskFailed    = "failed"
	TaskCancelled = "cancelled"
)

// Terminal reports whether the task's status can no longer change.
func (t Task) Terminal() bool {
	return t.Status == TaskCompleted || t.Status == TaskFailed || t.Status == TaskCancelled
}

// taskV1 is the stored form; owner and ID are the key.
type taskV1 struct {
	Session       string          `json:"session"`
	Tool          string          `json:"tool"`
	SandboxID     string          `json:"sandbox_id,omitempty"`
	PID           uint32          `json:"pid,omitempty"`
	LogFile       string          `json:"log_file,omitempty"`
	Head          json.RawMessage `json:"head,omitempty"`
	Status        string          `json:"status"`
	StatusMessage string          `json:"status_message,omitempty"`
	Result        json.RawMessage `json:"result,omitempty"`
	Created       time.Time       `json:"created"`
	Updated       time.Time       `json:"updated"`
	Expires       time.Time       `json:"expires"`
}

func (r taskV1) task(owner, id string) Task {
	return Task{ID: id, Owner: owner, Session: r.Session, Tool: r.Tool, SandboxID: r.SandboxID, PID: r.PID,
		LogFile: r.LogFile, Head: r.Head, Status: r.Status, StatusMessage: r.StatusMessage, Result: r.Result,
		Created: r.Created, Updated: r.Updated, Expires: r.Expires}
}

func taskRecord(t Task) taskV1 {
	return taskV1{Session: t.Session, Tool: t.Tool, SandboxID: t.SandboxID, PID: t.PID, LogFile: t.LogFile,
		Head: t.Head, Status: t.Status, StatusMessage: t.StatusMessage, Result: t.Result,
		Created: storedTime(t.Created), Updated: storedTime(t.Updated), Expires: storedTime(t.Expires)}
}

func checkTask(t Task) error {
	if err := checkName("task owner", t.Owner); err != nil {
		return err
	}
	if err := checkName("task ID", t.ID); err != nil {
		return err
	}
	switch t.Status {
	case TaskWorking, TaskCompleted, TaskFailed, TaskCancelled:
	default:
		return fmt.Errorf("state: task %s has an unknown status %q", t.ID, t.Status)
	}
	for _, raw := range []json.RawMessage{t.Head, t.Result} {
		if len(raw) > 0 && !json.Valid(raw) {
			return fmt.Errorf("state: task %s holds a result that is not JSON", t.ID)
		}
	}
	return nil
}

// PutTask inserts or replaces the task keyed by (Owner, ID), recording the owner if new. Zero Created and
// Updated are stored as Now(). The owner's tasks that expired are deleted in the same write, so that the records
// of tasks nobody asks about again do not pile up.
func (s *records) PutTask(t Task) error {
	if err := checkTask(t); err != nil {
		return err
	}
	return s.db.update(func(tx recordTx) error {
		now := storedTime(s.now())
		if err := tx.ensureOwner(t.Owner, now); err != nil {
			return err
		}
		var expired []string
		if err := tx.each(tableTasks, t.Owner, func(owner, id string, v []byte) error {
			var rec taskV1
			if err := s.decode(tableTasks, owner, id, v, &rec); err != nil {
				return err
			}
			if !rec.Expires.IsZero() && !now.Before(rec.Expires) {
				expired = append(expired, id)
			}
			return nil
		}); err != nil {
			return err
		}
		for _, id := range expired {
			if _, err := tx.del(tableTasks, t.Owner, id); err != nil {
				return err
			}
		}
		rec := taskRecord(t)
		if rec.Created.IsZero() {
			rec.Created = now
		}
		if rec.Updated.IsZero() {
			rec.Updated = now
		}
		return put(tx, tableTasks, t.Owner, t.ID, rec)
	})
}

// Task returns one task; ErrNotFound if absent or of another owner.
func (s *records) Task(owner, id string) (Task, error) {
	var out Task
	err := s.db.view(func(tx recordTx) error {
		var err error
		out, err = s.task(tx, owner, id)
		return err
	})
	return out, err
}

// UpdateTask runs fn on the task as one atomic read-modify-write (across processes too), and stores it with
// Updated set to Now(). If fn returns an error nothing is written and that error is returned. fn must not change
// Owner or ID. ErrNotFound if there is no such task.
func (s *records) UpdateTask(owner, id string, fn func(*Task) error) (Task, error) {
	var out Task
	err := s.db.update(func(tx recordTx) error {
		t, err := s.task(tx, owner, id)
		if err != nil {
			return err
		}
		if err := fn(&t); err != nil {
			return err
		}
		if t.Owner != owner || t.ID != id {
			return fmt.Errorf("state: UpdateTask may not change a task's owner or ID")
		}
		if err := checkTask(t); err != nil {
			return err
		}
		t.Updated = s.now()
		out = t
		rec := taskRecord(t)
		out.Created, out.Updated, out.Expires = rec.Created, rec.Updated, rec.Expires
		return put(tx, tableTasks, owner, id, rec)
	})
	return out, err
}

// task reads one task in tx; ErrNotFound if absent or of another owner.
func (s *records) task(tx recordTx, owner, id string) (Task, error) {
	v, err := tx.get(tableTasks, owner, id)
	if err != nil {
		return Task{}, err
	}
	if v == nil {
		return Task{}, fmt.Errorf("task %s of owner %q: %w", id, owner, ErrNotFound)
	}
	var rec taskV1
	if err := s.decode(tableTasks, owner, id, v, &rec); err != nil {
		return Task{}, err
	}
	return rec.task(owner, id), nil
}
