package webhook_test

import (
	"bytes"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/handoff-a2a/handoff/push"
	"github.com/handoff-a2a/handoff/push/webhook"
)

// jwksTransport answers every request with one JWKS, so the fuzz target
// fetches keys without a socket.
type jwksTransport []byte

func (b jwksTransport) RoundTrip(*http.Request) (*http.Response, error) {
	return &http.Response{
		StatusCode: http.StatusOK,
		Header:     http.Header{"Content-Type": {"application/json"}},
		Body:       io.NopCloser(bytes.NewReader(b)),
	}, nil
}

// FuzzVerify feeds arbitrary signature, token and body to Verify. Nothing
// may panic, and whatever is accepted must be a delivery the agent's Signer
// actually signed: its id, task and body, and the right token.
func FuzzVerify(f *testing.F) {
	ks := keySet(f, jose.EdDSA, "k1")
	jwks, err := ks.JWKS(t0)
	if err != nil {
		f.Fatal(err)
	}
	type signed struct{ taskID, body string }
	genuine := map[string]signed{} // by delivery id
	signer := push.NewSigner(ks, "https://agent.example/")
	for i, body := range []string{string(event), "", "{}", `{"task":{"id":"t1"}}`} {
		id := "d" + strconv.Itoa(i)
		tok, err := signer.Sign(hook, "t1", id, []byte(body), t0)
		if err != nil {
			f.Fatal(err)
		}
		genuine[id] = signed{"t1", body}
		f.Add(tok, "right", []byte(body))
		f.Add(tok, "wrong", []byte(body))
		f.Add(tok, "right", []byte(body+" "))
	}
	stranger, err := push.NewSigner(keySet(f, jose.EdDSA, "k1"), "").Sign(hook, "t1", "forged", event, t0)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(stranger, "right", event)
	f.Add("eyJhbGciOiJub25lIiwidHlwIjoiSldUIn0.eyJqdGkiOiJ4In0.", "right", event)
	f.Add("", "", []byte(nil))
	f.Add(strings.Repeat("a.", 40), "right", []byte("x"))

	client := &http.Client{Transport: jwksTransport(jwks)}
	f.Fuzz(func(t *testing.T, sig, token string, body []byte) {
		// A fresh Verifier each time: the replay check would refuse the seeds after the first run.
		v := webhook.NewVerifier("https://agent.example/.well-known/jwks.json", hook,
			webhook.WithToken("right"), webhook.WithClock(clock(t0)), webhook.WithHTTPClient(client))
		h := http.Header{}
		h.Set(webhook.HeaderSignature, sig)
		h.Set(webhook.HeaderToken, token)
		got, err := v.Verify(t.Context(), h, body)
		if err != nil {
			if got != nil {
				t.Fatalf("refusal %v returned a delivery", err)
			}
			return
		}
		want, ok := genuine[got.DeliveryID]
		if !ok || got.TaskID != want.taskID || string(body) != want.body || token != "right" || got.KeyID != "k1" {
			t.Fatalf("accepted a delivery the agent did not sign: %+v, body %q, token %q", got, body, token)
		}
	})
}
