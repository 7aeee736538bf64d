package a2ahttp

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"

	"github.com/a2aproject/a2a-go/v2/a2acompat/a2av0"
	"github.com/a2aproject/a2a-go/v2/a2asrv"

	"github.com/handoff-a2a/handoff/internal/rest03"
)

// This file mends answers of a2a-go v2.3.1's transport handlers that the
// A2A bindings or widely used clients need otherwise. Each wrapper looks at
// a request cheaply and touches only the answers it mends.

// Methods whose JSON-RPC answers a2a-go writes short of the bindings: the
// push config delete (1.0 and 0.3) and the 0.3 push config list.
var (
	deleteMethods = [][]byte{[]byte("DeleteTaskPushNotificationConfig"), []byte("tasks/pushNotificationConfig/delete")}
	list03Method  = []byte("tasks/pushNotificationConfig/list")
)

// jsonrpcMend gives a successful push config delete its result member
// (a2a-go answers {"jsonrpc","id"} alone, and JSON-RPC 2.0 wants a result
// or an error: {} in 1.0, google.protobuf.Empty, and null in 0.3), and an
// empty 0.3 push config list its [] (a2a-go writes null, and the 0.3 result
// is an array). Other methods pass untouched; the check is a byte search of
// the buffered body.
func jsonrpcMend(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, ok := r.Body.(*bufferedBody)
		if !ok {
			next.ServeHTTP(w, r)
			return
		}
		isDelete := bytes.Contains(b.data, deleteMethods[0]) || bytes.Contains(b.data, deleteMethods[1])
		isList03 := bytes.Contains(b.data, list03Method)
		if !isDelete && !isList03 {
			next.ServeHTTP(w, r)
			return
		}
		rec := newRecorder()
		next.ServeHTTP(rec, r)
		var env map[string]json.RawMessage
		if rec.status == http.StatusOK && json.Unmarshal(rec.body.Bytes(), &env) == nil && env["error"] == nil && env["jsonrpc"] != nil {
			result, mended := env["result"], false
			switch {
			case isDelete && result == nil:
				result, mended = json.RawMessage("null"), true
				if v, _, _ := requestedVersion(r); v == version10 {
					result = json.RawMessage("{}")
				}
			case isList03 && (result == nil || string(result) == "null"):
				result, mended = json.RawMessage("[]"), true
			}
			if mended {
				env["result"] = result
				if fixed, err := json.Marshal(env); err == nil {
					rec.body.Reset()
					rec.body.Write(fixed)
					rec.body.WriteByte('\n')
				}
			}
		}
		rec.flushTo(w)
	})
}

// restDeleteBody answers a successful REST push config delete with a JSON
// body ({}, google.protobuf.Empty) where a2a-go writes 0 bytes.
func restDeleteBody(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodDelete || !strings.Contains(r.URL.Path, "/pushNotificationConfigs/") {
			next.ServeHTTP(w, r)
			return
		}
		rec := newRecorder()
		next.ServeHTTP(rec, r)
		if rec.status/100 == 2 && rec.body.Len() == 0 {
			rec.status = http.StatusOK
			rec.header.Set("Content-Type", "application/json")
			rec.body.WriteString("{}")
		}
		rec.flushTo(w)
	})
}

// rest03Routes serves the 0.3 REST binding: under /v1 as the 0.3 specification
// and the official JS and Python SDKs speak it (proto JSON, see package
// rest03), on the bare paths in a2a-go's own dialect, which its a2av0
// client speaks.
func rest03Routes(h a2asrv.RequestHandler) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/v1/", rest03.NewHandler(h))
	mux.Handle("/", sseErrorAsHTTP(a2av0.NewRESTHandler(h)))
	return mux
}

// recorder holds an answer whole, so that it can be mended before it is
// sent. Only the small answers of the wrappers above pass through it.
type recorder struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func newRecorder() *recorder { return &recorder{header: http.Header{}, status: http.StatusOK} }

func (r *recorder) Header() http.Header         { return r.header }
func (r *recorder) Write(p []byte) (int, error) { return r.body.Write(p) }
func (r *recorder) WriteHeader(status int)      { r.status = status }

func (r *recorder) flushTo(w http.ResponseWriter) {
	for k, v := range r.header {
		w.Header()[k] = v
	}
	w.Header().Set("Content-Length", strconv.Itoa(r.body.Len()))
	w.WriteHeader(r.status)
	_, _ = w.Write(r.body.Bytes())
}
