package main

import (
	"bytes"
	"net/http"
	"strings"
	"testing"
)

// TestPushStatusOfSealedConfigs: the push status of a stopped agent lists
// configs whose token and URL are sealed, without the agent's keys: the URL
// masked, no secret printed.
func TestPushStatusOfSealedConfigs(t *testing.T) {
	dir := t.TempDir()
	url, stop := serveHandoff(t, dir, "name: A\ndescription: B\nlog: {level: error}\n"+
		"limits: {shutdown_grace: 1s}\nauth: {anonymous: true}\ncapabilities: {push_notifications: true}\n"+
		"push: {allow_hosts: [127.0.0.1], max_attempts: 1, timeout: 1s}\nskills: [{id: s, name: S, executor: tck}]\n")
	body := `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"tck-complete-task-1","role":"ROLE_USER","parts":[{"text":"hi"}]},` +
		`"configuration":{"taskPushNotificationConfig":{"url":"http://hookuser:pw-s3cret@127.0.0.1:9/hook?sig=q-s3cret","token":"tok-s3cret-123456"}}}}`
	req, _ := http.NewRequest("POST", url+"/a2a/jsonrpc", strings.NewReader(body))
	req.Header.Set("A2A-Version", "1.0")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("send: %s", resp.Status)
	}
	stop()
	var out bytes.Buffer
	if err := run(t.Context(), []string{"push", "status", "--data-dir", dir}, &out, &out); err != nil {
		t.Fatalf("push status --data-dir: %v\n%s", err, out.String())
	}
	text := out.String()
	if !strings.Contains(text, "http://***@127.0.0.1:9/hook?***") {
		t.Fatalf("the masked URL is not listed:\n%s", text)
	}
	if strings.Contains(text, "s3cret") {
		t.Fatalf("a secret was printed:\n%s", text)
	}
}
