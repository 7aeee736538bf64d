package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/a2aproject/a2a-go/v2/a2aclient"
	"github.com/a2aproject/a2a-go/v2/a2aclient/agentcard"
	"github.com/handoff-a2a/handoff"
)

const (
	// defaultTimeout bounds calls that wait for one answer. Streams have no default bound:
	// watching a long task is their purpose.
	defaultTimeout = 60 * time.Second
	// cardTimeout bounds fetching the agent card even when the command itself is unbounded:
	// the card is a small static document, so a server that cannot serve it quickly is not
	// going to serve a stream either.
	cardTimeout = 30 * time.Second
)

// runSend implements "handoff send URL TEXT": it sends TEXT as a user message and prints
// the answer, or with --stream every event as it arrives.
func runSend(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("send", stdout)
	stream := fs.Bool("stream", false, "print progress events as they arrive, then the final state")
	taskID := fs.String("task-id", "", "continue the task with this `ID`")
	contextID := fs.String("context-id", "", "send within the conversation context with this `ID`")
	returnNow := fs.Bool("return-immediately", false, "return as soon as the agent has created the task, without waiting for it to finish")
	data := fs.String("data", "", "also send this `JSON` object as a data part (a tool's arguments, an approval)")
	skill := fs.String("skill", "", "ask a Handoff agent for the skill with this `ID` (message metadata handoff/skill)")
	out := addOutputFlags(fs, "give up after `D`; 0 waits forever (with --stream: no limit unless given)")
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return err
	}
	if err := expectArgs("send", pos, "URL", "TEXT"); err != nil {
		return err
	}
	base, err := parseAgentURL(pos[0])
	if err != nil {
		return err
	}
	text := pos[1]
	if text == "" {
		return usagef("send: TEXT is empty")
	}
	if *stream && *returnNow {
		return usagef("send: --return-immediately applies to blocking sends only, not to --stream")
	}
	if *stream && !flagGiven(fs, "timeout") {
		out.timeout = 0
	}

	msg := a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart(text))
	if *data != "" {
		var obj map[string]any
		if err := json.Unmarshal([]byte(*data), &obj); err != nil {
			return usagef("send: --data is not a JSON object: %v", err)
		}
		msg.Parts = append(msg.Parts, a2a.NewDataPart(obj))
	}
	if *skill != "" {
		msg.SetMeta(handoff.SkillMetadataKey, *skill)
	}
	msg.TaskID = a2a.TaskID(*taskID)
	msg.ContextID = *contextID
	req := &a2a.SendMessageRequest{Message: msg}
	if *returnNow {
		req.Config = &a2a.SendMessageConfig{ReturnImmediately: true}
	}

	if *stream {
		return streamMessage(ctx, base, req, out, stdout)
	}
	op := "send message"
	callCtx, cancel := withTimeout(ctx, out.timeout)
	defer cancel()
	client, err := connect(callCtx, base, out)
	if err != nil {
		return callError(ctx, callCtx, op, err)
	}
	defer destroy(client)
	result, err := client.SendMessage(callCtx, req)
	if err != nil {
		return callError(ctx, callCtx, op, err)
	}
	if out.json {
		if err := writeJSONLine(stdout, a2a.StreamResponse{Event: result}); err != nil {
			return err
		}
	} else {
		switch r := result.(type) {
		case *a2a.Task:
			printTask(stdout, r, false)
		case *a2a.Message:
			printMessage(stdout, "message", r)
		}
	}
	if t, ok := result.(*a2a.Task); ok && !*returnNow {
		return unfinished(base, t)
	}
	return nil
}

// unfinished is the error of a blocking send answered with a task that neither ended nor
// waits for its caller (input or auth required): the agent returned early, typically
// because it is stopping and leaves the task to resume at its next start.
func unfinished(base *url.URL, t *a2a.Task) error {
	switch s := t.Status.State; {
	case s.Terminal(), s == a2a.TaskStateInputRequired, s == a2a.TaskStateAuthRequired:
		return nil
	default:
		return fmt.Errorf("send message: task %s is still %s: the agent answered before it finished (it may be stopping); follow it with: handoff get %s %s",
			t.ID, stateName(s), base, t.ID)
	}
}

// streamMessage sends req on a stream and prints each event as it arrives.
func streamMessage(ctx context.Context, base *url.URL, req *a2a.SendMessageRequest, out *outputFlags, stdout io.Writer) error {
	op := "stream message"
	callCtx, cancel := withTimeout(ctx, out.timeout)
	defer cancel()
	client, err := connect(callCtx, base, out)
	if err != nil {
		return callError(ctx, callCtx, op, err)
	}
	defer destroy(client)
	var final a2a.TaskState
	for ev, err := range client.SendStreamingMessage(callCtx, req) {
		if err != nil {
			return callError(ctx, callCtx, op, err)
		}
		if out.json {
			if err := writeJSONLine(stdout, a2a.StreamResponse{Event: ev}); err != nil {
				return err
			}
			continue
		}
		if state := printEvent(stdout, ev); state != a2a.TaskStateUnspecified {
			final = state
		}
	}
	// A stream answered by a plain message has no task, hence no state to conclude with.
	if !out.json && final != a2a.TaskStateUnspecified {
		fmt.Fprintf(stdout, "final state: %s\n", stateName(final))
	}
	return nil
}

// runGet implements "handoff get URL TASK_ID".
func runGet(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("get", stdout)
	history := fs.Int("history", 0, "include the last `N` messages of the task's history")
	out := addOutputFlags(fs, "give up after `D`; 0 waits forever")
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return err
	}
	if err := expectArgs("get", pos, "URL", "TASK_ID"); err != nil {
		return err
	}
	base, err := parseAgentURL(pos[0])
	if err != nil {
		return err
	}
	id := a2a.TaskID(pos[1])
	req := &a2a.GetTaskRequest{ID: id}
	// Only a given --history is sent: without it the agent applies its own default, and
	// people reading the output are not shown the history at all.
	showHistory := flagGiven(fs, "history")
	if showHistory {
		if *history < 0 {
			return usagef("get: --history must not be negative, got %d", *history)
		}
		req.HistoryLength = history
	}

	op := fmt.Sprintf("get task %s", id)
	callCtx, cancel := withTimeout(ctx, out.timeout)
	defer cancel()
	client, err := connect(callCtx, base, out)
	if err != nil {
		return callError(ctx, callCtx, op, err)
	}
	defer destroy(client)
	task, err := client.GetTask(callCtx, req)
	if err != nil {
		return callError(ctx, callCtx, op, err)
	}
	if out.json {
		return writeJSONLine(stdout, task)
	}
	printTask(stdout, task, showHistory)
	return nil
}

// runCancel implements "handoff cancel URL TASK_ID".
func runCancel(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("cancel", stdout)
	out := addOutputFlags(fs, "give up after `D`; 0 waits forever")
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return err
	}
	if err := expectArgs("cancel", pos, "URL", "TASK_ID"); err != nil {
		return err
	}
	base, err := parseAgentURL(pos[0])
	if err != nil {
		return err
	}
	id := a2a.TaskID(pos[1])

	op := fmt.Sprintf("cancel task %s", id)
	callCtx, cancel := withTimeout(ctx, out.timeout)
	defer cancel()
	client, err := connect(callCtx, base, out)
	if err != nil {
		return callError(ctx, callCtx, op, err)
	}
	defer destroy(client)
	task, err := client.CancelTask(callCtx, &a2a.CancelTaskRequest{ID: id})
	if err != nil {
		return callError(ctx, callCtx, op, err)
	}
	if out.json {
		return writeJSONLine(stdout, task)
	}
	printTask(stdout, task, false)
	return nil
}

// runTasks implements "handoff tasks URL": one page of the agent's tasks.
func runTasks(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("tasks", stdout)
	contextID := fs.String("context-id", "", "only tasks in the context with this `ID`")
	state := fs.String("state", "", "only tasks in this `STATE` (submitted, working, input-required, auth-required, completed, canceled, failed, rejected)")
	pageSize := fs.Int("page-size", 0, "at most `N` tasks, 1 to 100 (default: the agent's page size)")
	pageToken := fs.String("page-token", "", "continue the listing where the page that printed `TOKEN` ended")
	out := addOutputFlags(fs, "give up after `D`; 0 waits forever")
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return err
	}
	if err := expectArgs("tasks", pos, "URL"); err != nil {
		return err
	}
	base, err := parseAgentURL(pos[0])
	if err != nil {
		return err
	}
	if *pageSize < 0 || *pageSize > 100 {
		return usagef("tasks: --page-size must be between 1 and 100, got %d", *pageSize)
	}
	req := &a2a.ListTasksRequest{ContextID: *contextID, PageSize: *pageSize, PageToken: *pageToken}
	if *state != "" {
		if req.Status, err = parseState(*state); err != nil {
			return err
		}
	}

	op := "list tasks"
	callCtx, cancel := withTimeout(ctx, out.timeout)
	defer cancel()
	client, err := connect(callCtx, base, out)
	if err != nil {
		return callError(ctx, callCtx, op, err)
	}
	defer destroy(client)
	resp, err := client.ListTasks(callCtx, req)
	if err != nil {
		return callError(ctx, callCtx, op, err)
	}
	if out.json {
		return writeJSONLine(stdout, resp)
	}
	printTaskTable(stdout, resp)
	return nil
}

// outputFlags are the flags every client command shares.
type outputFlags struct {
	json    bool
	timeout time.Duration
	token   string // bearer token
	apiKey  string
	trust   string // JWKS the card must be signed with, or "origin"
}

// addOutputFlags defines --json and --timeout on fs; timeoutUsage says what the timeout bounds
// for this command.
func addOutputFlags(fs *flag.FlagSet, timeoutUsage string) *outputFlags {
	var o outputFlags
	fs.BoolVar(&o.json, "json", false, "print JSON, one object a line, and nothing else")
	fs.DurationVar(&o.timeout, "timeout", defaultTimeout, timeoutUsage)
	// Defaults from the environment keep credentials out of the process list.
	fs.StringVar(&o.token, "token", os.Getenv("HANDOFF_TOKEN"), "send this bearer `JWT` (default $HANDOFF_TOKEN)")
	fs.StringVar(&o.apiKey, "api-key", os.Getenv("HANDOFF_API_KEY"), "send this API `KEY`, in the header the agent's card names (default $HANDOFF_API_KEY)")
	fs.StringVar(&o.trust, "trust", "", "talk to the agent only if its card is signed by a key of this `JWKS` (URL or file), or, with \"origin\", by a key it publishes under its own origin")
	return &o
}

// credentials adds the caller's credentials to every request to the agent.
type credentials struct {
	next    http.RoundTripper
	headers http.Header
}

func (c *credentials) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range c.headers {
		r.Header[k] = v
	}
	return c.next.RoundTrip(r)
}

// apiKeyHeader is the header the card's API key scheme names, or X-API-Key.
func apiKeyHeader(card *a2a.AgentCard) string {
	for _, s := range card.SecuritySchemes {
		if k, ok := s.(a2a.APIKeySecurityScheme); ok && k.Location == a2a.APIKeySecuritySchemeLocationHeader && k.Name != "" {
			return k.Name
		}
	}
	return "X-API-Key"
}

// flagGiven reports whether the flag was set on the command line, which tells "the default"
// apart from "explicitly the default value".
func flagGiven(fs *flag.FlagSet, name string) bool {
	given := false
	fs.Visit(func(f *flag.Flag) {
		if f.Name == name {
			given = true
		}
	})
	return given
}

// expectArgs checks that the command line holds exactly the positional arguments names.
func expectArgs(cmd string, got []string, names ...string) error {
	if len(got) < len(names) {
		return usagef("%s: missing %s (see handoff %s --help)", cmd, strings.Join(names[len(got):], " and "), cmd)
	}
	if len(got) > len(names) {
		hint := ""
		if names[len(names)-1] == "TEXT" {
			hint = " (quote TEXT that contains spaces)"
		}
		return usagef("%s: unexpected argument %q%s", cmd, got[len(names)], hint)
	}
	for i, arg := range got {
		if arg == "" {
			return usagef("%s: %s is empty", cmd, names[i])
		}
	}
	return nil
}

// parseAgentURL checks that raw is an http(s) URL of an agent. Errors show the URL redacted:
// it may carry credentials.
func parseAgentURL(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil {
		// Neither raw nor err is shown: both would repeat a password the URL may hold.
		return nil, usagef("agent URL is not a valid URL")
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, usagef("agent URL must be an http:// or https:// URL, got %s", u.Redacted())
	}
	return u, nil
}

// parseState accepts a task state as people write it ("input-required") or as A2A spells it
// ("TASK_STATE_INPUT_REQUIRED").
func parseState(s string) (a2a.TaskState, error) {
	name := strings.ToUpper(strings.ReplaceAll(s, "-", "_"))
	if !strings.HasPrefix(name, "TASK_STATE_") {
		name = "TASK_STATE_" + name
	}
	switch st := a2a.TaskState(name); st {
	case a2a.TaskStateSubmitted, a2a.TaskStateWorking, a2a.TaskStateInputRequired, a2a.TaskStateAuthRequired,
		a2a.TaskStateCompleted, a2a.TaskStateCanceled, a2a.TaskStateFailed, a2a.TaskStateRejected:
		return st, nil
	}
	return a2a.TaskStateUnspecified, usagef("tasks: unknown --state %q", s)
}

// withTimeout bounds ctx by d unless d is 0. The cause names the limit, so that a timeout
// reads as such rather than as whatever I/O call it happened to interrupt.
func withTimeout(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	if d <= 0 {
		return context.WithCancel(ctx)
	}
	return context.WithTimeoutCause(ctx, d, fmt.Errorf("timed out after %s (see --timeout)", d))
}

// callError turns the failure of op into the command's result. An interrupt (parent is done)
// is a clean stop, as main promises; a timeout (callCtx is done) is reported as one.
func callError(parent, callCtx context.Context, op string, err error) error {
	if parent.Err() != nil {
		return nil
	}
	if callCtx.Err() != nil {
		return fmt.Errorf("%s: %w", op, context.Cause(callCtx))
	}
	return fmt.Errorf("%s: %w", op, err)
}

// connect fetches the agent card below base and opens a client on an interface the card
// offers, JSON-RPC preferred over HTTP+JSON.
func connect(ctx context.Context, base *url.URL, o *outputFlags) (*a2aclient.Client, error) {
	card, err := resolveCard(ctx, base, o)
	if err != nil {
		return nil, err
	}
	// No client-wide timeout: the transports' default one would cut long streams and
	// --timeout values beyond it; ctx bounds every call instead.
	hc := &http.Client{}
	if creds := credentialHeaders(card, o); len(creds) > 0 {
		hc = &http.Client{Transport: &credentials{next: http.DefaultTransport, headers: creds}}
	}
	client, err := a2aclient.NewFromCard(ctx, card,
		a2aclient.WithConfig(a2aclient.Config{
			PreferredTransports: []a2a.TransportProtocol{a2a.TransportProtocolJSONRPC, a2a.TransportProtocolHTTPJSON},
		}),
		a2aclient.WithJSONRPCTransport(hc),
		a2aclient.WithRESTTransport(hc),
	)
	if err != nil {
		return nil, fmt.Errorf("connect to agent at %s: %w", base.Redacted(), err)
	}
	return client, nil
}

// resolveCard fetches the agent card below base and, with --trust, checks its signature.
func resolveCard(ctx context.Context, base *url.URL, o *outputFlags) (*a2a.AgentCard, error) {
	cardCtx, cancel := context.WithTimeout(ctx, cardTimeout)
	defer cancel()
	card, err := agentcard.NewResolver(&http.Client{}).Resolve(cardCtx, base.String())
	if err != nil {
		return nil, fmt.Errorf("get agent card from %s: %w", base.Redacted(), err)
	}
	if o.trust != "" {
		t := trustFlags{jwks: o.trust}
		if o.trust == "origin" {
			t.jwks = ""
		}
		if _, err := t.verify(cardCtx, base, card); err != nil {
			return nil, fmt.Errorf("the card of %s is not trusted: %w", base.Redacted(), err)
		}
	}
	return card, nil
}

// credentialHeaders are the headers that carry the caller's credentials to the agent of
// card: the bearer token, and the API key in the header the card names. card may be nil
// when o holds no API key.
func credentialHeaders(card *a2a.AgentCard, o *outputFlags) http.Header {
	creds := http.Header{}
	if o.token != "" {
		creds.Set("Authorization", "Bearer "+o.token)
	}
	if o.apiKey != "" {
		creds.Set(apiKeyHeader(card), o.apiKey)
	}
	return creds
}

// destroy releases the client's transport. Its error is ignored: the command's work is done
// by then, and nothing the user could act on depends on it.
func destroy(client *a2aclient.Client) {
	_ = client.Destroy()
}

// writeJSONLine writes v as one line of JSON. HTML escaping is off because the output goes to
// programs and terminals, not into web pages.
func writeJSONLine(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

// writeJSONLines writes each of list as one line of JSON, so that --json output is one
// object per line whichever command prints it, and an empty list prints nothing.
func writeJSONLines[T any](w io.Writer, list []T) error {
	for _, v := range list {
		if err := writeJSONLine(w, v); err != nil {
			return err
		}
	}
	return nil
}

// printTask writes a task for people: one field a line, content of multi-line values indented.
func printTask(w io.Writer, t *a2a.Task, withHistory bool) {
	writeField(w, "task", string(t.ID))
	writeField(w, "context", t.ContextID)
	writeField(w, "state", stateName(t.Status.State))
	if t.Status.Message != nil {
		writeField(w, "status", partsText(t.Status.Message.Parts))
	}
	for _, a := range t.Artifacts {
		writeField(w, "artifact "+artifactLabel(a), partsText(a.Parts))
	}
	if withHistory {
		for _, m := range t.History {
			printMessage(w, "history", m)
		}
	}
}

// printMessage writes a message as "label ROLE: text".
func printMessage(w io.Writer, label string, m *a2a.Message) {
	writeField(w, label+" "+roleName(m.Role), partsText(m.Parts))
}

// printEvent writes one streamed event as one entry and returns the task state the event
// reports, if any.
func printEvent(w io.Writer, ev a2a.Event) a2a.TaskState {
	switch e := ev.(type) {
	case *a2a.Task:
		fmt.Fprintf(w, "task %s: %s\n", e.ID, stateName(e.Status.State))
		return e.Status.State
	case *a2a.TaskStatusUpdateEvent:
		label := "state " + stateName(e.Status.State)
		if e.Status.Message == nil {
			fmt.Fprintln(w, label)
		} else {
			writeField(w, label, partsText(e.Status.Message.Parts))
		}
		return e.Status.State
	case *a2a.TaskArtifactUpdateEvent:
		label := "artifact " + artifactLabel(e.Artifact)
		if e.Append {
			label += " (continued)"
		}
		writeField(w, label, partsText(e.Artifact.Parts))
	case *a2a.Message:
		printMessage(w, "message", e)
	}
	return a2a.TaskStateUnspecified
}

// printTaskTable writes a page of tasks as a table and, if there is more, how to get it.
func printTaskTable(w io.Writer, resp *a2a.ListTasksResponse) {
	if len(resp.Tasks) == 0 {
		fmt.Fprintln(w, "no tasks")
	} else {
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "ID\tSTATE\tUPDATED")
		for _, t := range resp.Tasks {
			updated := "-"
			if ts := t.Status.Timestamp; ts != nil {
				updated = ts.UTC().Format(time.RFC3339)
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\n", t.ID, stateName(t.Status.State), updated)
		}
		tw.Flush()
	}
	if resp.NextPageToken != "" {
		fmt.Fprintf(w, "next page: --page-token %s\n", resp.NextPageToken)
	}
}

// writeField writes "label: value", indenting the continuation lines of a multi-line value
// so that they stay visibly inside the field.
func writeField(w io.Writer, label, value string) {
	fmt.Fprintf(w, "%s: %s\n", label, strings.ReplaceAll(value, "\n", "\n  "))
}

// stateName renders a task state as people say it: "input-required" for TASK_STATE_INPUT_REQUIRED.
func stateName(s a2a.TaskState) string {
	name := strings.TrimPrefix(s.String(), "TASK_STATE_")
	return strings.ToLower(strings.ReplaceAll(name, "_", "-"))
}

// roleName renders a message role as people say it: "agent" for ROLE_AGENT.
func roleName(r a2a.MessageRole) string {
	return strings.ToLower(strings.TrimPrefix(r.String(), "ROLE_"))
}

// artifactLabel names an artifact by its name, or by its id when it has none.
func artifactLabel(a *a2a.Artifact) string {
	if a.Name != "" {
		return a.Name
	}
	return string(a.ID)
}

// partsText renders content parts one a line: text as is, other kinds as a short summary.
func partsText(parts []*a2a.Part) string {
	lines := make([]string, 0, len(parts))
	for _, p := range parts {
		lines = append(lines, partSummary(p))
	}
	return strings.Join(lines, "\n")
}

// partSummary renders one part: text as is, data as compact JSON, files by name, type and
// location or size, never their bytes.
func partSummary(p *a2a.Part) string {
	switch c := p.Content.(type) {
	case a2a.Text:
		return string(c)
	case a2a.Data:
		b, err := json.Marshal(c.Value)
		if err != nil {
			return "[data]"
		}
		return "[data] " + string(b)
	case a2a.URL:
		return fmt.Sprintf("[file%s] %s", fileDetails(p), redactURL(string(c)))
	case a2a.Raw:
		return fmt.Sprintf("[file%s, %d bytes]", fileDetails(p), len(c))
	}
	return "[unknown part]"
}

// fileDetails is the file name and media type of a file part, as " NAME, TYPE" with what is known.
func fileDetails(p *a2a.Part) string {
	var details []string
	for _, d := range []string{p.Filename, p.MediaType} {
		if d != "" {
			details = append(details, d)
		}
	}
	if len(details) == 0 {
		return ""
	}
	return " " + strings.Join(details, ", ")
}

// redactURL hides the password of a URL that carries one. A URL that does not parse is not
// shown at all, since where its password would be cannot be told.
func redactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(unparsable URL)"
	}
	return u.Redacted()
}
