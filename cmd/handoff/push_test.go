package main

import (
	"bytes"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/handoff-a2a/handoff/push"
)

func TestPushStatus(t *testing.T) {
	dir := t.TempDir()
	url, stop := serveHandoff(t, dir, "name: A\ndescription: B\nlog: {level: error}\n"+
		"limits: {shutdown_grace: 1s}\nauth: {anonymous: true}\ncapabilities: {push_notifications: true}\n"+
		"push: {allow_hosts: [127.0.0.1], max_attempts: 1, timeout: 1s}\nskills: [{id: s, name: S, executor: tck}]\n")
	// Port 9 on loopback refuses connections: the one attempt fails and is dead-lettered.
	body := `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"tck-complete-task-1","role":"ROLE_USER","parts":[{"text":"hi"}]},` +
		`"configuration":{"taskPushNotificationConfig":{"url":"http://127.0.0.1:9/hook?secret=s3cret"}}}}`
	req, _ := http.NewRequest("POST", url+"/a2a/jsonrpc", strings.NewReader(body))
	req.Header.Set("A2A-Version", "1.0")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()

	var out bytes.Buffer
	var st []push.Status
	for range 200 { // the agent's own view, until the dead letter is recorded
		out.Reset()
		if err := run(t.Context(), []string{"push", "status", url, "--json"}, &out, &out); err != nil {
			t.Fatal(err)
		}
		st = decodeLines[push.Status](t, out.String())
		if len(st) == 1 && len(st[0].Dead) > 0 {
			break
		}
		<-waitABit()
	}
	if len(st) != 1 || len(st[0].Dead) == 0 {
		t.Fatalf("statuses %+v", st)
	}
	stop()
	out.Reset()
	if err := run(t.Context(), []string{"push", "status", "--data-dir", dir}, &out, &out); err != nil {
		t.Fatal(err)
	}
	text := out.String()
	if !strings.Contains(text, "dead: task") || !strings.Contains(text, "http://127.0.0.1:9/hook") {
		t.Fatalf("table:\n%s", text)
	}
	if strings.Contains(text, "s3cret") {
		t.Fatalf("the webhook URL's query was printed:\n%s", text)
	}
}

// waitABit is a short poll interval for state another goroutine records.
func waitABit() <-chan time.Time { return time.After(10 * time.Millisecond) }
