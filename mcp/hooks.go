package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/handoff-a2a/handoff/mcp/policy"
)

// HookPoint is where in a call's road a [Hook] runs.
type HookPoint string

const (
	// HookPreToolCall runs after the policy decided allow or ask and before the call: a guard.
	// It may deny or ask, never allow past the policy, and it cannot change the arguments. A
	// guard that fails (times out, exits non-zero, cannot start, answers what does not
	// parse) denies the call, with the hook's name in the reason: it fails closed.
	HookPreToolCall HookPoint = "pre_tool_call"
	// HookPostToolCall runs after the call (and after a denial), with its outcome: an
	// observer. One that fails is logged and changes nothing: it fails open.
	HookPostToolCall HookPoint = "post_tool_call"
	// HookTaskCreated runs, an observer, once a new task's first write is stored
	// ([TaskHookEvent]); [Observers] runs it.
	HookTaskCreated HookPoint = "task_created"
	// HookTaskFinished runs, an observer, once the write that ended a task (completed,
	// failed, canceled, rejected) is stored ([TaskHookEvent]); [Observers] runs it.
	HookTaskFinished HookPoint = "task_finished"
	// HookGateDecided runs, an observer, once a delegation's acceptance gate decided, or
	// the delegation ended without a decision ([GateHookEvent]); [Observers] runs it.
	HookGateDecided HookPoint = "gate_decided"
)

// pipelinePoints are the points a [Pipeline] runs; [Observers] runs the others.
var (
	pipelinePoints = []HookPoint{HookPreToolCall, HookPostToolCall}
	observerPoints = []HookPoint{HookTaskCreated, HookTaskFinished, HookGateDecided}
)

// defaultHookTimeout bounds a hook that sets no Timeout.
const defaultHookTimeout = 5 * time.Second

// maxHookAnswer bounds what a hook may write back.
const maxHookAnswer = 64 << 10

// Hook is a program or an HTTP endpoint run at a fixed point: of every tool call, by the
// pipeline ([HookEvent]), or of every task and gate decision, by [Observers]
// ([TaskHookEvent], [GateHookEvent]). It gets one JSON object on stdin, or as a POST body,
// and a guard answers with one JSON object ([HookAnswer]) on stdout or as the response
// body; an empty answer means no objection. Hooks of one point run in the order given, each
// to its end before the next; a guard's deny stops the rest.
type Hook struct {
	// Name names the hook in reasons and logs; unique.
	Name string
	// Point is where it runs.
	Point HookPoint
	// Command, for a command hook, is the program; Args its arguments. It runs in a process
	// group of its own, killed at the timeout, with an environment restricted as a stdio MCP
	// server's is: PATH, the InheritEnv names, then Env (${VAR} expanded from the agent's).
	Command string
	// Args are the command's arguments.
	Args []string
	// Env adds variables to a command hook's environment.
	Env map[string]string
	// InheritEnv names the agent's variables a command hook inherits besides PATH.
	InheritEnv []string
	// URL, for an http hook, is where the event is POSTed, through the client given with
	// [WithHookClient] (the agent's: the push SSRF guard's).
	URL string
	// Timeout bounds one run; zero means 5s.
	Timeout time.Duration
}

// HookEvent is what a hook is told of a call. It carries the canonical arguments with the
// contract's redacted values masked, as an approver sees them.
type HookEvent struct {
	// Point is the hook point.
	Point HookPoint `json:"point"`
	// Hook is the hook's own name.
	Hook string `json:"hook"`
	// TaskID, Principal, Tenant, Skill and Tool say whose call of what.
	TaskID string `json:"task_id"`
	// Principal is the caller.
	Principal string `json:"principal"`
	// Tenant is the caller's tenant, if known.
	Tenant string `json:"tenant,omitempty"`
	// Skill is the skill the call serves, if known.
	Skill string `json:"skill,omitempty"`
	// Tool is the catalog name.
	Tool string `json:"tool"`
	// Arguments are the canonical arguments, redacted values masked.
	Arguments map[string]any `json:"arguments"`
	// ArgsDigest is the call's argument digest.
	ArgsDigest string `json:"args_digest"`
	// Resources are the canonical resources.
	Resources []policy.Resource `json:"resources"`
	// Decision is the policy's decision (the pre hook sees allow or ask).
	Decision policy.Decision `json:"decision"`
	// Outcome, for post_tool_call, is how the call ended.
	Outcome Outcome `json:"outcome,omitempty"`
}

// HookAnswer is a guard's answer; observers' answers are ignored.
type HookAnswer struct {
	// Decision is deny, ask or allow (allow, or empty, is no objection: never more).
	Decision policy.Verdict `json:"decision"`
	// Reason says why, for the caller and the audit.
	Reason string `json:"reason"`
}

// checkHooks reports every problem of a hook list at once; points are the
// points it may name.
func checkHooks(hooks []Hook, client *http.Client, points []HookPoint) []error {
	var errs []error
	seen := map[string]bool{}
	for i, h := range hooks {
		bad := func(format string, args ...any) {
			errs = append(errs, fmt.Errorf("hook %d (%q): %s", i, h.Name, fmt.Sprintf(format, args...)))
		}
		if h.Name == "" {
			bad("no name")
		} else if seen[h.Name] {
			bad("name used twice")
		}
		seen[h.Name] = true
		if !slices.Contains(points, h.Point) {
			bad("point %q is not one of %s", h.Point, joinPoints(points))
		}
		switch {
		case (h.Command == "") == (h.URL == ""):
			bad("give a command or a url, one of them")
		case h.URL != "":
			if u, err := url.Parse(h.URL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				bad("url is not an absolute http(s) URL")
			}
			if client == nil {
				bad("an http hook needs the agent's guarded client (WithHookClient, ObserversConfig.Client)")
			}
		case h.Args != nil && h.Command == "":
			bad("args without a command")
		}
		if h.Timeout < 0 {
			bad("negative timeout")
		}
	}
	return errs
}

func joinPoints(points []HookPoint) string {
	s := make([]string, len(points))
	for i, p := range points {
		s[i] = string(p)
	}
	return strings.Join(s, ", ")
}

// hookRunner runs the hooks of one pipeline configuration.
type hookRunner struct {
	pre, post []Hook
	client    *http.Client
	lookupEnv LookupEnv
	logger    *slog.Logger
}

// guard runs the pre_tool_call hooks on ev and returns the strictest answer and the hook
// that gave it ("" when none objected).
func (r *hookRunner) guard(ctx context.Context, ev HookEvent) (policy.Verdict, string, string) {
	verdict, by, why := policy.Allow, "", ""
	for _, h := range r.pre {
		ev.Hook = h.Name
		a, err := r.run(ctx, h, ev)
		switch {
		case err != nil:
			return policy.Deny, h.Name, fmt.Sprintf("hook %s failed: %v", h.Name, err)
		case a.Decision == policy.Deny:
			return policy.Deny, h.Name, hookReason(h.Name, "denied the call", a.Reason)
		case a.Decision == policy.Ask && verdict == policy.Allow:
			verdict, by, why = policy.Ask, h.Name, hookReason(h.Name, "asks for an approval", a.Reason)
		case a.Decision == "" || a.Decision == policy.Allow || a.Decision == policy.Ask:
		default:
			return policy.Deny, h.Name, fmt.Sprintf("hook %s failed: it answered decision %q", h.Name, a.Decision)
		}
	}
	return verdict, by, why
}

func hookReason(name, did, reason string) string {
	if reason == "" {
		return fmt.Sprintf("hook %s %s", name, did)
	}
	return fmt.Sprintf("hook %s %s: %s", name, did, reason)
}

// observe runs the post_tool_call hooks; a failure is logged, nothing more.
func (r *hookRunner) observe(ctx context.Context, ev HookEvent) {
	for _, h := range r.post {
		ev.Hook = h.Name
		if _, err := r.run(ctx, h, ev); err != nil {
			r.logger.Warn("observing hook failed", slog.String("hook", h.Name), slog.String("tool", ev.Tool),
				slog.String("task_id", ev.TaskID), slog.Any("error", err))
		}
	}
}

// run runs one hook once on ev (a JSON object naming the hook), within its
// timeout, and decodes its answer.
func (r *hookRunner) run(ctx context.Context, h Hook, ev any) (HookAnswer, error) {
	body, err := json.Marshal(ev)
	if err != nil {
		return HookAnswer{}, fmt.Errorf("encode the event: %w", err)
	}
	timeout := h.Timeout
	if timeout == 0 {
		timeout = defaultHookTimeout
	}
	// The call's cancellation does not cut a hook short: an observer must see the ending,
	// and a guard is bounded by its timeout.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
	defer cancel()
	var out []byte
	if h.Command != "" {
		out, err = r.runCommand(ctx, h, body)
	} else {
		out, err = r.postHTTP(ctx, h, body)
	}
	if err != nil {
		if ctx.Err() != nil {
			return HookAnswer{}, fmt.Errorf("timed out after %s", timeout)
		}
		return HookAnswer{}, err
	}
	var a HookAnswer
	if len(bytes.TrimSpace(out)) == 0 {
		return a, nil
	}
	if err := json.Unmarshal(out, &a); err != nil {
		return HookAnswer{}, fmt.Errorf("its answer is not a JSON object: %w", err)
	}
	return a, nil
}

func (r *hookRunner) runCommand(ctx context.Context, h Hook, stdin []byte) ([]byte, error) {
	env, err := ServerConfig{InheritEnv: h.InheritEnv, Env: h.Env}.environ(r.lookupEnv)
	if err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, h.Command, h.Args...)
	cmd.Env = env
	cmd.Stdin = bytes.NewReader(stdin)
	var stdout limitedBuffer
	cmd.Stdout = &stdout
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) } // the whole group
	cmd.WaitDelay = time.Second
	if err := cmd.Run(); err != nil {
		var exit *exec.ExitError
		if errors.As(err, &exit) && ctx.Err() == nil {
			return nil, fmt.Errorf("exited with status %d", exit.ExitCode())
		}
		return nil, err
	}
	if stdout.over {
		return nil, fmt.Errorf("its answer is over %d bytes", maxHookAnswer)
	}
	return stdout.Bytes(), nil
}

func (r *hookRunner) postHTTP(ctx context.Context, h Hook, body []byte) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, h.URL, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := r.client.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // the URL may hold a secret: never repeat it
		}
		return nil, err
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(io.LimitReader(resp.Body, maxHookAnswer+1))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode/100 != 2 {
		return nil, fmt.Errorf("answered HTTP %d", resp.StatusCode)
	}
	if len(out) > maxHookAnswer {
		return nil, fmt.Errorf("its answer is over %d bytes", maxHookAnswer)
	}
	return out, nil
}

// limitedBuffer keeps the first maxHookAnswer bytes written and notes any more.
type limitedBuffer struct {
	bytes.Buffer
	over bool
}

func (b *limitedBuffer) Write(p []byte) (int, error) {
	if room := maxHookAnswer - b.Len(); len(p) > room {
		b.over = true
		p = p[:max(room, 0)]
	}
	b.Buffer.Write(p)
	return len(p), nil // swallow the rest: a hook blocked on a full pipe would only time out
}

// newHookRunner splits hooks by point, keeping their order.
func newHookRunner(hooks []Hook, client *http.Client, lookup LookupEnv, logger *slog.Logger) *hookRunner {
	r := &hookRunner{client: client, lookupEnv: lookup, logger: logger}
	for _, h := range hooks {
		switch h.Point {
		case HookPreToolCall:
			r.pre = append(r.pre, h)
		case HookPostToolCall:
			r.post = append(r.post, h)
		}
	}
	return r
}
