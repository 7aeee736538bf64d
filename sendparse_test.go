package handoff

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"
)

// decodeSendStd decodes a request as streamJSONRPC does without parseSend.
func decodeSendStd(data []byte) (rpcEnvelope, a2a.SendMessageRequest, bool) {
	var env rpcEnvelope
	var req a2a.SendMessageRequest
	if json.Unmarshal(data, &env) != nil || json.Unmarshal(env.Params, &req) != nil {
		return env, req, false
	}
	return env, req, true
}

var sendSeeds = []string{
	`{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"m-1","role":"ROLE_USER","parts":[{"text":"hello"}]}}}`,
	`{"jsonrpc":"2.0","id":"abc","method":"SendStreamingMessage","params":{"message":{"messageId":"m","contextId":"c","taskId":"t","role":"ROLE_AGENT","parts":[{"text":"a"},{"text":"b"}]}}}`,
	" {\n\t\"params\" : { \"message\" : { \"parts\" : [ { \"text\" : \"é ✓\" } ] , \"role\" : \"ROLE_UNSPECIFIED\" } } , \"method\":\"SendMessage\", \"id\": -1.5e3, \"jsonrpc\":\"2.0\" }\r\n",
	`{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{}}}`,
	`{"jsonrpc":"2.0","id":-0,"method":"SendMessage","params":{"message":{"parts":[{"text":""}]}}}`,
	`{"jsonrpc":"2.0","id":1e-400,"method":"SendStreamingMessage","params":{"message":{"role":"user"}}}`,
	// Each of these is left to encoding/json.
	`{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":"t"}}`,
	`{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"m","parts":[]}}}`,
	`{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"m\u0041","parts":[{"text":"x"}]}}}`,
	`{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"MessageId":"m","parts":[{"text":"x"}]}}}`,
	`{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"m","parts":[{"text":"x","metadata":{}}]}}}`,
	`{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"configuration":{"blocking":true},"message":{"parts":[{"text":"x"}]}}}`,
	`{"jsonrpc":"2.0","id":1,"method":"SendMessage","method":"SendMessage","params":{"message":{}}}`,
	`{"jsonrpc":"2.0","id":null,"method":"SendMessage","params":{"message":{}}}`,
	`{"jsonrpc":"2.0","id":1e400,"method":"SendMessage","params":{"message":{}}}`,
	`{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"\xff","parts":[{"text":"x"}]}}}`,
	`{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{}}} x`,
	`{"jsonrpc":"1.0","id":1,"method":"SendMessage","params":{"message":{}}}`,
}

// TestParseSend checks the requests parseSend takes decode as encoding/json
// decodes them, and that it takes the common ones: a request it leaves to
// encoding/json is slower, not wrong, so only this test would notice.
func TestParseSend(t *testing.T) {
	for i, in := range sendSeeds {
		var env rpcEnvelope
		var req a2a.SendMessageRequest
		took := parseSend([]byte(in), &env, &req)
		if want := i < 6; took != want {
			t.Errorf("seed %d: parseSend took it: %v, want %v: %s", i, took, want, in)
		}
		if took {
			checkSameAsStd(t, []byte(in), env, req)
		}
	}
}

func checkSameAsStd(t *testing.T, in []byte, env rpcEnvelope, req a2a.SendMessageRequest) {
	t.Helper()
	stdEnv, stdReq, ok := decodeSendStd(in)
	if !ok {
		t.Fatalf("parseSend took what encoding/json refuses: %q", in)
	}
	stdEnv.Params = nil
	// The id is echoed in the answer: compared as written back, so that
	// -0 and 0 (equal to DeepEqual) differ.
	id, _ := json.Marshal(env.ID)
	stdID, _ := json.Marshal(stdEnv.ID)
	if !reflect.DeepEqual(env, stdEnv) || string(id) != string(stdID) {
		t.Fatalf("envelope %#v, encoding/json's %#v, of %q", env, stdEnv, in)
	}
	if !reflect.DeepEqual(req, stdReq) {
		t.Fatalf("request %#v, encoding/json's %#v, of %q", req.Message, stdReq.Message, in)
	}
}

// FuzzParseSend holds parseSend to encoding/json: whatever it takes, it
// decodes exactly as encoding/json and a2a-go's unmarshalers do.
func FuzzParseSend(f *testing.F) {
	for _, s := range sendSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		var env rpcEnvelope
		var req a2a.SendMessageRequest
		if parseSend(in, &env, &req) {
			checkSameAsStd(t, in, env, req)
		}
	})
}

// BenchmarkDecodeSend decodes a blocking SendMessage request as the
// JSON-RPC route does (parseSend) and as encoding/json does.
func BenchmarkDecodeSend(b *testing.B) {
	in := []byte(sendSeeds[0])
	b.Run("parseSend", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var env rpcEnvelope
			var req a2a.SendMessageRequest
			if !parseSend(in, &env, &req) {
				b.Fatal("not taken")
			}
		}
	})
	b.Run("encoding-json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, _, ok := decodeSendStd(in); !ok {
				b.Fatal("refused")
			}
		}
	})
}
