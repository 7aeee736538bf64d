package model

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/shared"
)

// Secret is an API key. It logs and prints as REDACTED.
type Secret string

// LogValue implements slog.LogValuer.
func (Secret) LogValue() slog.Value { return slog.StringValue("REDACTED") }

// String implements fmt.Stringer.
func (Secret) String() string { return "REDACTED" }

// GoString implements fmt.GoStringer.
func (Secret) GoString() string { return "REDACTED" }

// ToolDef is a function tool as offered to the model.
type ToolDef struct {
	// Name is what the model calls the tool by.
	Name string
	// Description tells the model what the tool does.
	Description string
	// Parameters is the JSON Schema of the arguments, decoded.
	Parameters map[string]any
}

// Request is one model round trip's input.
type Request struct {
	// Messages are the conversation so far, the system message first.
	Messages []Message
	// Tools are the tools offered for this round trip; none offers none.
	Tools []ToolDef
}

// Reply is the model's answer: text, tool calls, or both.
type Reply struct {
	// Content is the model's text; empty when it only calls tools.
	Content string
	// ToolCalls are the calls the model proposes; none ends the run.
	ToolCalls []ToolCall
	// FinishReason is the endpoint's finish_reason ("stop", "tool_calls",
	// "length", ...).
	FinishReason string
	// Usage is what the endpoint says the round trip cost, zero when it
	// does not say.
	Usage Usage
}

// Usage counts a round trip's tokens, as the endpoint reports them.
type Usage struct {
	// PromptTokens were read, CompletionTokens written.
	PromptTokens, CompletionTokens int64
}

// Client speaks OpenAI-compatible Chat Completions to one [Endpoint].
type Client struct {
	svc   openai.ChatCompletionService
	model string
}

// NewClient returns a client of e. apiKey is the value of the variable e.APIKeyEnv names, read
// by the composition root ("" sends no Authorization header). The client reads no OPENAI_*
// variable of its own. Retries are openai-go's: e's max_retries attempts more on a lost
// connection or a 408, 409, 429 or 5xx answer, after the delay Retry-After-Ms or Retry-After
// asks for (up to two minutes) or an exponential backoff (0.5 s doubling, at most 8 s, with
// jitter). Each attempt is bounded by e's timeout; ctx bounds them all.
func NewClient(e Endpoint, apiKey Secret, hc *http.Client) *Client {
	if hc == nil {
		hc = &http.Client{}
	}
	opts := []option.RequestOption{
		option.WithHTTPClient(hc),
		option.WithBaseURL(strings.TrimSuffix(e.BaseURL, "/") + "/"),
		option.WithMaxRetries(e.maxRetries()),
		option.WithRequestTimeout(e.timeout()),
	}
	if apiKey != "" {
		opts = append(opts, option.WithAPIKey(string(apiKey)))
	}
	// NewChatCompletionService, not openai.NewClient: the latter also reads OPENAI_API_KEY,
	// OPENAI_BASE_URL and others from the environment.
	return &Client{svc: openai.NewChatCompletionService(opts...), model: e.Model}
}

// Complete sends one request and returns the first choice. Its errors carry the HTTP status
// at most, never the key or the request.
func (c *Client) Complete(ctx context.Context, r Request) (Reply, error) {
	params := openai.ChatCompletionNewParams{Model: shared.ChatModel(c.model), Messages: wireMessages(r.Messages)}
	for _, t := range r.Tools {
		params.Tools = append(params.Tools, openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{
			Name:        t.Name,
			Description: openai.String(t.Description),
			Parameters:  shared.FunctionParameters(t.Parameters),
		}))
	}
	res, err := c.svc.New(ctx, params)
	if err != nil {
		var apiErr *openai.Error
		if errors.As(err, &apiErr) { // its Error() is a status line; its fields may hold secrets
			return Reply{}, fmt.Errorf("chat completion %s: status %d", c.model, apiErr.StatusCode)
		}
		return Reply{}, fmt.Errorf("chat completion %s: %w", c.model, err)
	}
	return parseReply(res)
}

// wireMessages converts stored messages to the library's parameters.
func wireMessages(ms []Message) []openai.ChatCompletionMessageParamUnion {
	out := make([]openai.ChatCompletionMessageParamUnion, 0, len(ms))
	for _, m := range ms {
		switch m.Role {
		case RoleSystem:
			out = append(out, openai.SystemMessage(m.Content))
		case RoleUser:
			out = append(out, openai.UserMessage(m.Content))
		case RoleTool:
			out = append(out, openai.ToolMessage(m.Content, m.ToolCallID))
		case RoleAssistant:
			a := openai.ChatCompletionAssistantMessageParam{}
			if m.Content != "" {
				a.Content.OfString = openai.String(m.Content)
			}
			for _, tc := range m.ToolCalls {
				a.ToolCalls = append(a.ToolCalls, openai.ChatCompletionMessageToolCallUnionParam{
					OfFunction: &openai.ChatCompletionMessageFunctionToolCallParam{
						ID:       tc.ID,
						Function: openai.ChatCompletionMessageFunctionToolCallFunctionParam{Name: tc.Name, Arguments: tc.Arguments},
					},
				})
			}
			out = append(out, openai.ChatCompletionMessageParamUnion{OfAssistant: &a})
		}
	}
	return out
}

// parseReply takes the first choice. Tool calls get ids that are present and unique within
// the reply (a model that repeats or omits them still gets one correlated result per call);
// custom (non-function) tool calls keep their name so that they are refused as unknown.
func parseReply(res *openai.ChatCompletion) (Reply, error) {
	if res == nil || len(res.Choices) == 0 {
		return Reply{}, ErrNoChoices
	}
	ch := res.Choices[0]
	r := Reply{Content: ch.Message.Content, FinishReason: ch.FinishReason,
		Usage: Usage{PromptTokens: res.Usage.PromptTokens, CompletionTokens: res.Usage.CompletionTokens}}
	seen := map[string]bool{}
	for i, tc := range ch.Message.ToolCalls {
		call := ToolCall{ID: tc.ID, Name: tc.Function.Name, Arguments: tc.Function.Arguments}
		if tc.Type == "custom" {
			call.Name, call.Arguments = tc.Custom.Name, tc.Custom.Input
		}
		if call.ID == "" || seen[call.ID] {
			call.ID = fmt.Sprintf("call_%d_%s", i, call.ID)
		}
		for seen[call.ID] {
			call.ID += "_"
		}
		seen[call.ID] = true
		r.ToolCalls = append(r.ToolCalls, call)
	}
	if r.Content == "" && len(r.ToolCalls) == 0 && ch.Message.Refusal != "" {
		r.Content = ch.Message.Refusal
	}
	return r, nil
}
