package mcp_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"

	"github.com/handoff-a2a/handoff/mcp"
)

func ExampleObservers() {
	told := make(chan mcp.TaskHookEvent, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		var ev mcp.TaskHookEvent
		_ = json.NewDecoder(r.Body).Decode(&ev)
		told <- ev
	}))
	defer srv.Close()
	obs, err := mcp.NewObservers([]mcp.Hook{{Name: "tell-ops", Point: mcp.HookTaskFinished, URL: srv.URL}},
		mcp.ObserversConfig{Client: srv.Client()})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer obs.Close()
	obs.Notify(mcp.TaskHookEvent{Point: mcp.HookTaskFinished, TaskID: "t1", State: "TASK_STATE_COMPLETED"})
	ev := <-told
	fmt.Println(ev.Hook, ev.Point, ev.TaskID, ev.State)
	// Output: tell-ops task_finished t1 TASK_STATE_COMPLETED
}
