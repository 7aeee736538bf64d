package a2ahttp

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// TestBudgetGivenBackOnce: a body's bytes are given back (and dropped)
// when the answer starts, and only once, however the handler answers (a
// write, a flush, both), so the budget never grows past its size.
func TestBudgetGivenBackOnce(t *testing.T) {
	budget := newBodyBudget(100)
	lim := bodyLimits{max: 100, timeout: time.Second, budget: budget}
	h := limitBody(lim, false, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if budget.free != 60 {
			t.Errorf("budget free = %d while a 40-byte body is held, want 60", budget.free)
		}
		w.WriteHeader(http.StatusOK)
		if budget.free != 100 {
			t.Errorf("budget free = %d once the answer started, want 100", budget.free)
		}
		if b := r.Body.(*bufferedBody); b.data != nil || b.Len() != 0 {
			t.Errorf("the body's bytes are still held once the answer started")
		}
		_, _ = w.Write([]byte("a"))
		http.NewResponseController(w).Flush()
	}))
	for range 3 {
		req, _ := http.NewRequest("POST", "/", strings.NewReader(strings.Repeat("x", 40)))
		h.ServeHTTP(httptest.NewRecorder(), req)
	}
	if budget.free != 100 {
		t.Fatalf("budget free = %d after three requests, want 100", budget.free)
	}
}

// rpcSeeds are requests decodeRPC takes (the first six) and leaves to
// a2a-go's handler (the rest).
var rpcSeeds = []string{
	`{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"m-1","role":"ROLE_USER","parts":[{"text":"hello"}]}}}`,
	`{"jsonrpc":"2.0","id":"abc","method":"SendStreamingMessage","params":{"message":{"messageId":"m","contextId":"c","taskId":"t","role":"ROLE_AGENT","parts":[{"text":"a"},{"text":"b"}]}}}`,
	" {\n\t\"params\" : { \"message\" : { \"parts\" : [ { \"text\" : \"é ✓\" } ] , \"role\" : \"ROLE_USER\" } } , \"method\":\"SendMessage\", \"id\": -1.5e3, \"jsonrpc\":\"2.0\" }\r\n",
	`{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"configuration":{"returnImmediately":true},"message":{"messageId":"m\u0041","parts":[{"text":"x","metadata":{"k":1}}]}}}`,
	`{"jsonrpc":"2.0","id":"g","method":"GetTask","params":{"id":"t-1","historyLength":2}}`,
	`{"jsonrpc":"2.0","id":"s","method":"SubscribeToTask","params":{"id":"t-2"}}`,
	`{"jsonrpc":"2.0","id":null,"method":"SendMessage","params":{"message":{}}}`,
	`{"jsonrpc":"2.0","method":"SendMessage","params":{"message":{}}}`,
	`{"jsonrpc":"2.0","id":{"a":1},"method":"SendMessage","params":{"message":{}}}`,
	`{"jsonrpc":"2.0","id":1e400,"method":"SendMessage","params":{"message":{}}}`,
	`{"jsonrpc":"1.0","id":1,"method":"SendMessage","params":{"message":{}}}`,
	`{"jsonrpc":"2.0","id":1,"method":"ListTasks","params":{}}`,
	`{"jsonrpc":"2.0","id":1,"method":"message/send","params":{"message":{}}}`,
	`{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":"hello"}}`,
	`{"jsonrpc":"2.0","id":1,"method":"GetTask","params":[1]}`,
	`{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{}}} x`,
	`[1,2]`, `{`, `null`,
}

// TestDecodeRPC: decodeRPC takes the JSON-RPC 2.0 SendMessage,
// SendStreamingMessage, SubscribeToTask and GetTask requests with a string or number id, as
// encoding/json and a2a-go's unmarshalers decode them, and leaves every
// other request to a2a-go's handler, which answers it in its own way.
func TestDecodeRPC(t *testing.T) {
	for i, in := range rpcSeeds {
		var (
			env rpcEnvelope
			p   rpcParams
		)
		took := decodeRPC([]byte(in), &env, &p)
		if want := i < 6; took != want {
			t.Errorf("seed %d: taken %v, want %v: %s", i, took, want, in)
			continue
		}
		if !took {
			continue
		}
		switch env.Method {
		case "GetTask":
			if p.get.ID != "t-1" || p.get.HistoryLength == nil || *p.get.HistoryLength != 2 {
				t.Errorf("seed %d: GetTask decoded as %+v", i, p.get)
			}
		case "SubscribeToTask":
			if p.sub.ID != "t-2" {
				t.Errorf("seed %d: SubscribeToTask decoded as %+v", i, p.sub)
			}
		default:
			if p.send.Message == nil || len(p.send.Message.Parts) == 0 || p.send.Message.Parts[0].Text() == "" {
				t.Errorf("seed %d: message decoded as %+v", i, p.send.Message)
			}
		}
	}
	var (
		env rpcEnvelope
		p   rpcParams
	)
	if !decodeRPC([]byte(rpcSeeds[3]), &env, &p) || p.send.Message.ID != "mA" || p.send.Config == nil || !p.send.Config.ReturnImmediately {
		t.Errorf("escapes and configuration: message %+v, configuration %+v", p.send.Message, p.send.Config)
	}
}

// FuzzDecodeRPC: decodeRPC never panics, and what it takes is a JSON-RPC
// 2.0 request of a method the fast path serves, whose id (echoed in the
// answer) re-encodes as the same string or number.
func FuzzDecodeRPC(f *testing.F) {
	for _, s := range rpcSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		var (
			env rpcEnvelope
			p   rpcParams
		)
		if !decodeRPC(in, &env, &p) {
			return
		}
		switch env.Method {
		case "SendMessage", "SendStreamingMessage", "GetTask", "SubscribeToTask":
		default:
			t.Fatalf("took method %q of %q", env.Method, in)
		}
		if env.JSONRPC != "2.0" {
			t.Fatalf("took jsonrpc %q of %q", env.JSONRPC, in)
		}
		id, err := json.Marshal(env.ID)
		var back any
		if err != nil || json.Unmarshal(id, &back) != nil || back != env.ID || !plainID(back) {
			t.Fatalf("id %#v of %q re-encodes as %s (%v)", env.ID, in, id, err)
		}
	})
}
