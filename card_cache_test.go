package handoff

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// TestStaticJSONConditional checks the card and JWKS handler's validators:
// an ETag and a Last-Modified on every answer, 304 to a matching
// If-None-Match or to an If-Modified-Since not before the last change, and
// If-None-Match taking precedence when both are sent (RFC 9110 13.2.2).
func TestStaticJSONConditional(t *testing.T) {
	h := staticJSON([]byte(`{"name":"card"}`), time.Minute)
	do := func(method string, header map[string]string) *httptest.ResponseRecorder {
		req := httptest.NewRequest(method, "/.well-known/agent-card.json", nil)
		for k, v := range header {
			req.Header.Set(k, v)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec
	}

	first := do(http.MethodGet, nil)
	if first.Code != http.StatusOK || first.Body.String() != `{"name":"card"}` {
		t.Fatalf("GET: %d %q", first.Code, first.Body.String())
	}
	etag, lastModified := first.Header().Get("ETag"), first.Header().Get("Last-Modified")
	modified, err := http.ParseTime(lastModified)
	if etag == "" || err != nil {
		t.Fatalf("GET: ETag %q, Last-Modified %q (%v): want both", etag, lastModified, err)
	}
	if got := first.Header().Get("Content-Type"); got != "application/json" {
		t.Errorf("Content-Type = %q", got)
	}

	for _, tc := range []struct {
		name   string
		method string
		header map[string]string
		want   int
	}{
		{"same etag", http.MethodGet, map[string]string{"If-None-Match": etag}, http.StatusNotModified},
		{"other etag", http.MethodGet, map[string]string{"If-None-Match": `"other"`}, http.StatusOK},
		{"since last change", http.MethodGet, map[string]string{"If-Modified-Since": lastModified}, http.StatusNotModified},
		{"since later", http.MethodGet, map[string]string{"If-Modified-Since": modified.Add(time.Hour).Format(http.TimeFormat)}, http.StatusNotModified},
		{"since earlier", http.MethodGet, map[string]string{"If-Modified-Since": modified.Add(-time.Hour).Format(http.TimeFormat)}, http.StatusOK},
		{"etag wins over date", http.MethodGet, map[string]string{"If-None-Match": `"other"`, "If-Modified-Since": lastModified}, http.StatusOK},
		{"head since last change", http.MethodHead, map[string]string{"If-Modified-Since": lastModified}, http.StatusNotModified},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := do(tc.method, tc.header)
			if rec.Code != tc.want {
				t.Fatalf("status %d, want %d", rec.Code, tc.want)
			}
			if rec.Header().Get("ETag") != etag {
				t.Errorf("ETag %q, want %q", rec.Header().Get("ETag"), etag)
			}
			// A 304 carrying an ETag leaves Last-Modified out (RFC 9110 15.4.5).
			if rec.Code == http.StatusOK && rec.Header().Get("Last-Modified") != lastModified {
				t.Errorf("Last-Modified %q, want %q", rec.Header().Get("Last-Modified"), lastModified)
			}
			if rec.Code == http.StatusNotModified && rec.Body.Len() != 0 {
				t.Errorf("304 with a body of %d bytes", rec.Body.Len())
			}
		})
	}
}
