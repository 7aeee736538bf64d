package push_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	jose "github.com/go-jose/go-jose/v4"

	"github.com/handoff-a2a/handoff/agentcard"
	"github.com/handoff-a2a/handoff/push"
	"github.com/handoff-a2a/handoff/tasks"
	"github.com/handoff-a2a/handoff/tasks/boltstore"
)

// A webhook that was down dead-lettered an event; once it is back, an
// operator asks for the event again and the dispatcher's worker sends it.
func ExampleDispatcher_Retry() {
	var up atomic.Bool
	got := make(chan string, 1)
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !up.Load() {
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		got <- r.Header.Get("A2A-Push-Delivery-Id")
	}))
	defer hook.Close()

	dir, _ := os.MkdirTemp("", "push")
	defer os.RemoveAll(dir)
	store, err := boltstore.Open(filepath.Join(dir, "tasks.db"), time.Second)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer store.Close()
	ctx := context.Background()
	owner := tasks.Owner{Principal: "user:key:alice"}
	task := &a2a.Task{ID: "t1", ContextID: "c1", Status: a2a.TaskStatus{State: a2a.TaskStateCompleted}}
	_ = store.Append(ctx, &tasks.Snapshot{Task: task, Owner: owner, Version: 1, Updated: time.Now()}, []a2a.Event{task})
	_ = store.PutPushConfig(ctx, owner, &a2a.PushConfig{TaskID: "t1", ID: "hook", URL: hook.URL})
	_ = store.UpdatePushDelivery(ctx, &tasks.PushDelivery{Owner: owner, Config: &a2a.PushConfig{TaskID: "t1", ID: "hook"}})

	key, _ := agentcard.GenerateKey(jose.EdDSA, "k1")
	keys, _ := agentcard.NewKeySet(time.Hour, agentcard.Key{JWK: key, NotBefore: time.Now().Add(-time.Minute)})
	d := push.NewDispatcher(store, push.NewSigner(keys, "https://agent.example"), push.NewGuard([]string{"127.0.0.1"}).Client(time.Second),
		push.WithRetries(1, time.Hour), push.WithLogger(slog.New(slog.DiscardHandler)))
	run, stop := context.WithCancel(ctx)
	defer stop()
	go d.Run(run)
	d.Watch("t1")
	d.Notify("t1")
	for {
		st, _ := push.Statuses(ctx, store, nil)
		if len(st) == 1 && len(st[0].Dead) == 1 {
			fmt.Println("dead letter:", st[0].Dead[0].Seq, st[0].Dead[0].Reason)
			break
		}
		time.Sleep(10 * time.Millisecond)
	}

	up.Store(true)
	if _, err := d.Retry(ctx, owner, "t1", "hook", 1, "key:alice"); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("delivered:", <-got)
	// Output:
	// dead letter: 1 HTTP 503 Service Unavailable
	// delivered: t1/hook/1
}
