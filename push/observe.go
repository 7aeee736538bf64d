package push

import (
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
)

// Outcomes of a delivery attempt, as an [Observer] hears them.
const (
	// AttemptDelivered: the webhook took the event.
	AttemptDelivered = "delivered"
	// AttemptRetry: the attempt failed and the event is tried again later.
	AttemptRetry = "retry"
	// AttemptDead: the attempt failed and the event is given up (a dead letter).
	AttemptDead = "dead"
)

// An Observer hears of every delivery attempt's end ([WithObserver]):
// metrics. It is called on the delivery workers and must be cheap and safe
// for concurrent use.
type Observer interface {
	// DeliveryAttempt reports one attempt: its outcome (AttemptDelivered,
	// AttemptRetry or AttemptDead), how long the POST took, and for a
	// delivered status update how long after the update it arrived (0 for
	// events that carry no time).
	DeliveryAttempt(outcome string, took, lag time.Duration)
}

// observeAttempt reports an attempt to deliver ev that started took ago.
func observeAttempt(o Observer, ev a2a.Event, delivered, dead bool, took time.Duration, now time.Time) {
	outcome, lag := AttemptRetry, time.Duration(0)
	switch {
	case delivered:
		outcome = AttemptDelivered
		if su, ok := ev.(*a2a.TaskStatusUpdateEvent); ok && su.Status.Timestamp != nil {
			lag = now.Sub(*su.Status.Timestamp)
		}
	case dead:
		outcome = AttemptDead
	}
	o.DeliveryAttempt(outcome, took, lag)
}

// Outcomes of an operator's request to retry ([Dispatcher.Retry]), as a
// [RetryObserver] hears them, one per event the request names.
const (
	// RetryDelivered: a dead letter was sent once more, and taken.
	RetryDelivered = "delivered"
	// RetryFailed: a dead letter was sent once more, and refused; it stays.
	RetryFailed = "failed"
	// RetryNow: the event being retried was made due at once.
	RetryNow = "now"
	// RetryStale: the event had been delivered (or redelivered) already.
	RetryStale = "stale"
)

// A RetryObserver is an [Observer] that also hears how operators' requests
// to retry end. It is called on the delivery workers.
type RetryObserver interface {
	Observer
	// Retried reports one event of a request: RetryDelivered, RetryFailed,
	// RetryNow or RetryStale.
	Retried(outcome string)
}
