package tasks_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/handoff-a2a/handoff/tasks"
	"github.com/handoff-a2a/handoff/tasks/boltstore"
)

// printLifecycle prints each task's start and end; a real observer hands them on to a queue.
type printLifecycle struct{}

func (printLifecycle) TaskCreated(_ *tasks.Snapshot, state a2a.TaskState) {
	fmt.Println("created:", state)
}

func (printLifecycle) TaskFinished(s *tasks.Snapshot) {
	fmt.Println("finished:", s.Task.Status.State)
}

func ExampleWithLifecycleObserver() {
	dir, _ := os.MkdirTemp("", "lifecycle")
	defer os.RemoveAll(dir)
	st, err := boltstore.Open(filepath.Join(dir, "tasks.db"), time.Second)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer st.Close()
	e, err := tasks.NewEngine(context.Background(), st, &scriptExec{}, tasks.WithLifecycleObserver(printLifecycle{}))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer e.Shutdown(context.Background())
	if _, err := e.SendMessage(context.Background(), send("hi")); err != nil {
		fmt.Println(err)
	}
	// Output:
	// created: TASK_STATE_SUBMITTED
	// finished: TASK_STATE_COMPLETED
}
