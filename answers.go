package handoff

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
)

// This file mends answers of a2a-go v2.3.1's transport handlers that the
// A2A bindings or widely used clients need otherwise. Each wrapper looks at
// a request cheaply and touches only the answers it mends.

// deleteMethods name the push config delete in JSON-RPC, 1.0 and 0.3.
var deleteMethods = [][]byte{[]byte("DeleteTaskPushNotificationConfig"), []byte("tasks/pushNotificationConfig/delete")}

// jsonrpcDeleteResult gives a successful push config delete its result
// member: a2a-go answers {"jsonrpc","id"} alone, and JSON-RPC 2.0 wants a
// result or an error. The 1.0 result is google.protobuf.Empty ({}), the 0.3
// one null. Other methods pass untouched; the check is a byte search of the
// buffered body.
func jsonrpcDeleteResult(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, ok := r.Body.(*bufferedBody)
		if !ok || !(bytes.Contains(b.data, deleteMethods[0]) || bytes.Contains(b.data, deleteMethods[1])) {
			next.ServeHTTP(w, r)
			return
		}
		rec := newRecorder()
		next.ServeHTTP(rec, r)
		var env map[string]json.RawMessage
		if rec.status == http.StatusOK && json.Unmarshal(rec.body.Bytes(), &env) == nil && env["result"] == nil && env["error"] == nil && env["jsonrpc"] != nil {
			env["result"] = json.RawMessage("null")
			if v, _, _ := requestedVersion(r); v == version10 {
				env["result"] = json.RawMessage("{}")
			}
			if fixed, err := json.Marshal(env); err == nil {
				rec.body.Reset()
				rec.body.Write(fixed)
				rec.body.WriteByte('\n')
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

// stripV1 serves the 0.3 REST paths with the /v1 the 0.3 specification puts
// before them (POST /v1/message:send, as the JS SDK 0.3 client sends), as
// well as the bare paths a2a-go's a2av0 handler serves.
func stripV1(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if rest, ok := strings.CutPrefix(r.URL.Path, "/v1/"); ok {
			r2 := *r
			u := *r.URL
			u.Path, u.RawPath = "/"+rest, ""
			r2.URL = &u
			r = &r2
		}
		next.ServeHTTP(w, r)
	})
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
