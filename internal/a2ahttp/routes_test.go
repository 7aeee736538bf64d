package a2ahttp

import (
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
