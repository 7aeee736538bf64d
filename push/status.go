package push

import (
	"context"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/handoff-a2a/handoff/tasks"
)

// StatusStore is what [Statuses] reads of the task store (both task stores
// implement it).
type StatusStore interface {
	PushDeliveries(ctx context.Context, task a2a.TaskID) ([]*tasks.PushDelivery, error)
	Get(ctx context.Context, owner tasks.Owner, id a2a.TaskID) (*tasks.Snapshot, error)
}

// Status is where the deliveries of one push config stand.
type Status struct {
	// TaskID names the task.
	TaskID a2a.TaskID `json:"task_id"`
	// ConfigID names the task's push config.
	ConfigID string `json:"config_id"`
	// URL is the webhook, masked: see [tasks.MaskedURL].
	URL string `json:"url"`
	// Delivered counts the events delivered.
	Delivered int `json:"delivered"`
	// Pending counts the events of the task's log not yet handled.
	Pending uint64 `json:"pending"`
	// Attempts counts the attempts at the next event's delivery while it is
	// being retried; it is zero otherwise, as are NextRetry and LastError.
	Attempts int `json:"attempts,omitempty"`
	// NextRetry is when the next event's delivery is tried again.
	NextRetry time.Time `json:"next_retry,omitzero"`
	// LastError says why the next event's last attempt failed.
	LastError string `json:"last_error,omitempty"`
	// Dead lists the events given up on after their retries.
	Dead []tasks.DeadDelivery `json:"dead,omitempty"`
	// Retries are the operators' requests to retry the delivery worker has
	// yet to handle ([Dispatcher.Retry]).
	Retries []tasks.PushRetry `json:"retries,omitempty"`
}

// Statuses lists every push config's delivery state; with owner set, only
// that owner's.
func Statuses(ctx context.Context, store StatusStore, owner *tasks.Owner) ([]Status, error) {
	pds, err := store.PushDeliveries(ctx, "")
	if err != nil {
		return nil, err
	}
	out := []Status{}
	for _, pd := range pds {
		if owner != nil && pd.Owner != *owner {
			continue
		}
		s := Status{TaskID: pd.Config.TaskID, ConfigID: pd.Config.ID, URL: tasks.MaskedURL(pd.Config.URL),
			Delivered: pd.DeliveredCount, Attempts: pd.Attempts, NextRetry: pd.NextAttempt, LastError: pd.LastError, Dead: pd.Dead, Retries: pd.Retries}
		if snap, err := store.Get(ctx, pd.Owner, pd.Config.TaskID); err == nil && snap.Version > pd.Delivered {
			s.Pending = snap.Version - pd.Delivered
		}
		out = append(out, s)
	}
	return out, nil
}

// WriteStatusTable prints statuses for people, one config a line, then each
// dead-lettered event.
func WriteStatusTable(w io.Writer, statuses []Status) error {
	if len(statuses) == 0 {
		_, err := fmt.Fprintln(w, "no push configs")
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TASK\tCONFIG\tURL\tDELIVERED\tPENDING\tDEAD\tLAST ERROR")
	for _, s := range statuses {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%d\t%s\n", s.TaskID, s.ConfigID, s.URL, s.Delivered, s.Pending, len(s.Dead), s.LastError)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, s := range statuses {
		for _, d := range s.Dead {
			fmt.Fprintf(w, "dead: task %s config %s event %d after %d attempts at %s: %s\n",
				s.TaskID, s.ConfigID, d.Seq, d.Attempts, d.At.Format(time.RFC3339), d.Reason)
		}
	}
	return nil
}
