package tasks

import (
	"context"
	"fmt"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"
)

// A Redactor is an executor whose messages may carry values that must never
// be kept: a tool contract's redacted arguments. The engine stores and
// publishes (history, event log, streams, push) the form of each message
// Redact returns, while the executor gets the message as it was sent, since
// the call needs the real values. What is stored cannot be run again: an
// executor must not rebuild a call from a task's history.
type Redactor interface {
	// Redact returns ec.Message as the engine may keep it, or ec.Message
	// itself when nothing in it is secret; it must not change ec.Message.
	// An error refuses the message.
	Redact(ctx context.Context, ec *a2asrv.ExecutorContext) (*a2a.Message, error)
}

// redact is the form of ec.Message the engine keeps.
func (e *Engine) redact(ctx context.Context, ec *a2asrv.ExecutorContext) (*a2a.Message, error) {
	r, ok := e.exec.(Redactor)
	if !ok {
		return ec.Message, nil
	}
	m, err := r.Redact(ctx, ec)
	if err != nil {
		return nil, executorError(fmt.Errorf("redact message %s: %w", ec.Message.ID, err))
	}
	if m == nil {
		return ec.Message, nil
	}
	return m, nil
}

// keptMessage is the run's message as the engine stores it.
func (r *run) keptMessage() *a2a.Message {
	if r.kept != nil {
		return r.kept
	}
	return r.ec.Message
}

// keptHistory returns history with the run's message in its kept form;
// changed is false, and history returned as it is, when it holds no message
// to replace.
func (r *run) keptHistory(history []*a2a.Message) (_ []*a2a.Message, changed bool) {
	kept, sent := r.kept, r.ec.Message
	if kept == nil || kept == sent {
		return history, false
	}
	var out []*a2a.Message
	for i, m := range history {
		if m != sent && (m == nil || m.ID == "" || m.ID != sent.ID) {
			continue
		}
		if out == nil {
			out = append([]*a2a.Message(nil), history...)
		}
		out[i] = kept
	}
	if out == nil {
		return history, false
	}
	return out, true
}
