package e2e

import (
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
)

// TestSubscribeInterruptedEveryBinding subscribes, on every binding, to a
// task waiting for input: the stream stays open while it waits (an
// interrupted task is not terminal, A2A 1.0 3.1.6) and ends once the answer
// completes it, with the completed state last.
func TestSubscribeInterruptedEveryBinding(t *testing.T) {
	a := startAgent(t, agentConfig{})
	card := fetchCard(t, a)
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			c := tr.connect(t, card)
			task := sendTask(t, c, &a2a.SendMessageRequest{Message: userMessage(uniqueID("tck-input-required"), "start")})
			wantState(t, "the first answer", task, a2a.TaskStateInputRequired)

			type item struct {
				ev  a2a.Event
				err error
			}
			items := make(chan item, 32)
			go func() {
				defer close(items)
				for ev, err := range c.SubscribeToTask(callCtx(t), &a2a.SubscribeToTaskRequest{ID: task.ID}) {
					items <- item{ev, err}
					if err != nil {
						return
					}
				}
			}()
			next := func(what string) (item, bool) {
				t.Helper()
				select {
				case it, open := <-items:
					if it.err != nil {
						t.Fatalf("%s: the subscription failed: %v", what, it.err)
					}
					return it, open
				case <-time.After(15 * time.Second):
					t.Fatalf("%s: nothing within 15s", what)
				}
				return item{}, false
			}
			first, open := next("the first event")
			if !open {
				t.Fatal("the subscription ended at once")
			}
			wantTaskEvent(t, "the subscription's first event", first.ev, task.ID, a2a.TaskStateInputRequired)
			select {
			case it, open := <-items:
				t.Fatalf("while the task waits: %v %v (open %t), want the stream open and quiet", it.ev, it.err, open)
			case <-time.After(300 * time.Millisecond):
			}

			reply := userMessage(uniqueID("answer"), "here it is")
			reply.TaskID, reply.ContextID = task.ID, task.ContextID
			wantState(t, "the answer", sendTask(t, c, &a2a.SendMessageRequest{Message: reply}), a2a.TaskStateCompleted)
			var last a2a.Event
			for {
				it, open := next("the answered turn")
				if !open {
					break
				}
				last = it.ev
			}
			if up, ok := last.(*a2a.TaskStatusUpdateEvent); !ok || up.Status.State != a2a.TaskStateCompleted {
				t.Errorf("last event %#v, want the completed status", last)
			}
		})
	}
}
