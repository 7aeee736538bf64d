package e2e

import (
	"errors"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
)

// TestPushRefusesSpecialPurposeTargets: 192.0.2.2 is a documentation
// address (TEST-NET-1) and, on this machine, the address of its own
// interface, so a listener there is reachable. The agent, whose push
// allow-list names only loopback, refuses it and every other form of a
// refused address as a push target on every binding, when the task is sent
// and when a config is created, with InvalidParams, and nothing connects to
// the listener.
func TestPushRefusesSpecialPurposeTargets(t *testing.T) {
	ln, err := net.Listen("tcp", "192.0.2.2:0")
	if err != nil {
		// Elsewhere 192.0.2.2 is not local: the refusals are checked all the same.
		t.Logf("192.0.2.2 is not an address of this machine (%v): listening on loopback instead", err)
		if ln, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
			t.Fatal(err)
		}
	}
	var accepted atomic.Int32
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			c.Close()
		}
	}()
	t.Cleanup(func() { ln.Close() })
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	// The control: the listener is reachable from here, so only the guard keeps a delivery away.
	if c, err := net.DialTimeout("tcp", ln.Addr().String(), 5*time.Second); err != nil {
		t.Fatalf("the listener is not reachable: %v", err)
	} else {
		c.Close()
	}
	deadline := time.Now().Add(5 * time.Second)
	for accepted.Load() != 1 {
		if time.Now().After(deadline) {
			t.Fatal("the control connection was not accepted")
		}
		time.Sleep(5 * time.Millisecond)
	}
	accepted.Store(0)

	ag := startAgent(t, agentConfig{})
	hosts := []string{
		"192.0.2.2", "[::ffff:192.0.2.2]", "[::192.0.2.2]", "[64:ff9b::c000:202]", "[2002:c000:202::]",
		"198.18.0.1", "192.0.0.8", "[::127.0.0.1]", "[2002:7f00:1::]", "[2001:db8::1]",
	}
	for _, tr := range transports {
		if tr.name == "connect-1.0" {
			continue // its test transport has no push config methods
		}
		t.Run(tr.name, func(t *testing.T) {
			c := tr.connect(t, fetchCard(t, ag))
			waiting := sendTask(t, c, &a2a.SendMessageRequest{Message: userMessage(uniqueID("tck-input-required"), "wait")})
			wantState(t, "waiting task", waiting, a2a.TaskStateInputRequired)
			for _, host := range hosts {
				target := "https://" + host + ":" + port + "/hook"
				_, err := c.SendMessage(callCtx(t), &a2a.SendMessageRequest{
					Message: userMessage(uniqueID("tck-complete-task"), "push me"),
					Config:  &a2a.SendMessageConfig{PushConfig: &a2a.PushConfig{URL: target}},
				})
				if !errors.Is(err, a2a.ErrInvalidParams) {
					t.Errorf("SendMessage with push to %s: %v, want InvalidParams", target, err)
				}
				_, err = c.CreateTaskPushConfig(callCtx(t), &a2a.PushConfig{TaskID: waiting.ID, URL: target})
				if !errors.Is(err, a2a.ErrInvalidParams) {
					t.Errorf("CreateTaskPushConfig to %s: %v, want InvalidParams", target, err)
				}
			}
		})
	}
	if n := accepted.Load(); n != 0 {
		t.Fatalf("%d connections reached the listener on %s", n, ln.Addr())
	}
}
