package skill

import (
	"context"

	"github.com/a2aproject/a2a-go/v2/a2a"
)

// ForgetTask deletes what the built-in executors keep of task id in st (a
// model skill's conversation): retention calls it for a task it purged. A
// task that kept nothing is no error.
func ForgetTask(ctx context.Context, st State, id a2a.TaskID) error {
	return st.Delete(ctx, stateKey(id))
}
