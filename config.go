package handoff

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/handoff-a2a/handoff/internal/auth"
	"github.com/handoff-a2a/handoff/internal/datadir"
	"github.com/handoff-a2a/handoff/internal/model"
	"github.com/handoff-a2a/handoff/internal/skill"
	"github.com/handoff-a2a/handoff/mcp/policy"
)

// Config is one agent's configuration, read from YAML. The README documents
// every field; [LoadConfig] refuses unknown fields.
type Config struct {
	// Name is the agent's name on its card; required.
	Name string `yaml:"name"`
	// Description says what the agent does, on its card; required.
	Description string `yaml:"description"`
	// Version is the agent's version on its card. Default 0.1.0.
	Version string `yaml:"version"`
	// Provider names who runs the agent, on its card; optional.
	Provider *ProviderConfig `yaml:"provider"`
	// DocumentationURL is the agent's documentation, on its card; optional.
	DocumentationURL string `yaml:"documentation_url"`

	// Listen is the TCP address to serve on. Default 127.0.0.1:8080.
	Listen string `yaml:"listen"`
	// PublicURL is the base URL peers reach the agent at, used in the card.
	// Default: http:// plus the address actually bound.
	PublicURL string `yaml:"public_url"`
	// DataDir holds the embedded task store and the default signing key.
	// Default ./data.
	DataDir string `yaml:"data_dir"`
	// Store chooses where tasks, event logs and push state live.
	Store StoreConfig `yaml:"store"`
	// Retention says how long finished tasks are kept. Default: forever.
	Retention RetentionConfig `yaml:"retention"`

	// Capabilities declares the optional A2A features the agent serves.
	Capabilities CapabilitiesConfig `yaml:"capabilities"`
	// Limits bounds what one request or the whole agent may use.
	Limits LimitsConfig `yaml:"limits"`
	// Server bounds the HTTP server: its timeouts and connection limits.
	Server ServerConfig `yaml:"server"`
	// Log sets the log's level and format.
	Log LogConfig `yaml:"log"`

	// DefaultInputModes are the media types the agent accepts, on its card.
	// Default text/plain.
	DefaultInputModes []string `yaml:"default_input_modes"`
	// DefaultOutputModes are the media types the agent answers in, on its
	// card. Default text/plain.
	DefaultOutputModes []string `yaml:"default_output_modes"`

	// Models are the OpenAI-compatible Chat Completions endpoints that
	// skills with executor: model use.
	Models []ModelConfig `yaml:"models"`
	// Skills are what the agent can do; at least one.
	Skills []SkillConfig `yaml:"skills"`

	// Signing holds the keys the card is signed with. Default: one Ed25519
	// key in DataDir/signing-key.jwk, made at the first start.
	Signing SigningConfig `yaml:"signing"`

	// Auth says who may call the agent. Default: nobody (fail closed).
	Auth AuthConfig `yaml:"auth"`
	// Push tunes push notification delivery (capabilities.push_notifications).
	Push PushSettings `yaml:"push"`

	// Delegation is how this agent receives delegated tasks.
	Delegation DelegationConfig `yaml:"delegation"`
	// Peers are the agents this one may delegate to, each with the rule its
	// card must verify under.
	Peers []PeerConfigYAML `yaml:"peers"`

	// MCPServers are the MCP servers whose tools the agent's skills use.
	MCPServers []MCPServerConfig `yaml:"mcp_servers"`
	// ToolContracts classify tools locally (server annotations are never
	// trusted). A tool without one is write, high risk, approval mandatory.
	ToolContracts []ToolContractConfig `yaml:"tool_contracts"`
	// Policy holds the rules that decide every tool call. Default: none, and
	// the contracts alone decide (a tool without one is denied).
	Policy PolicyConfig `yaml:"policy"`
	// Approvers are the principals ("key:NAME", "jwt:ISSUER#SUBJECT") whose
	// messages may approve a tool call that needs approval. Default: none.
	Approvers []string `yaml:"approvers"`
	// ExtendedCard adds to the card that GetExtendedAgentCard shows
	// authenticated callers. Unset: the method answers UnsupportedOperation.
	ExtendedCard *ExtendedCardConfig `yaml:"extended_card"`
	// MCPServer serves the agent's skills as MCP tools at a path of its own.
	MCPServer MCPFaceConfig `yaml:"mcp_server"`
	// Card chooses the form the public card is served in.
	Card CardSettings `yaml:"card"`
	// Metrics serves Prometheus metrics. Default: at /metrics, behind the
	// agent's authentication.
	Metrics MetricsConfig `yaml:"metrics"`
	// Console is the operator console at /console (on by default).
	Console ConsoleConfig `yaml:"console"`

	path string // the file it came from, for messages
}

// ProviderConfig names the organisation behind the agent.
type ProviderConfig struct {
	// Organization is the organisation's name.
	Organization string `yaml:"organization"`
	// URL is the organisation's web site.
	URL string `yaml:"url"`
}

// CapabilitiesConfig declares optional A2A features.
type CapabilitiesConfig struct {
	// Streaming enables SendStreamingMessage and SubscribeToTask. Default true.
	Streaming *bool `yaml:"streaming"`
	// PushNotifications enables the push config methods. Default false.
	PushNotifications bool `yaml:"push_notifications"`
}

// LimitsConfig bounds what one request or one agent may use.
type LimitsConfig struct {
	// MaxBodyBytes bounds a request body. Default 4 MiB.
	MaxBodyBytes int64 `yaml:"max_body_bytes"`
	// MaxConcurrentTasks bounds executions running at once. Default 256.
	MaxConcurrentTasks int `yaml:"max_concurrent_tasks"`
	// ExecutorIdleTimeout fails a task whose executor yields nothing for this
	// long. Default 2m; "0s" turns it off.
	ExecutorIdleTimeout *Duration `yaml:"executor_idle_timeout"`
	// ShutdownGrace is how long a stopping agent lets running tasks finish
	// before failing them. Default 10s.
	ShutdownGrace *Duration `yaml:"shutdown_grace"`
}

// ServerConfig bounds what callers may hold of the HTTP server, so that
// clients that send slowly, hold idle connections or open many never take
// it from the callers it serves. There is no write timeout: a stream lasts
// as long as its task.
type ServerConfig struct {
	// ReadHeaderTimeout bounds reading a request's headers. Default 10s.
	ReadHeaderTimeout *Duration `yaml:"read_header_timeout"`
	// ReadTimeout bounds reading an A2A request's body, counted from the
	// end of its headers; a slower body is answered 408 and its connection
	// closed. Default 30s.
	ReadTimeout *Duration `yaml:"read_timeout"`
	// IdleTimeout closes a keep-alive connection that carried no request
	// for this long. Default 60s.
	IdleTimeout *Duration `yaml:"idle_timeout"`
	// MaxConnections bounds the connections the server holds. At the cap, a
	// new connection closes the connection idle longest (callers that never
	// authenticated on theirs first), or is answered 503 when every one is
	// busy. It is lowered to what the process's file descriptor limit
	// allows, with a warning. Default 4096.
	MaxConnections int `yaml:"max_connections"`
	// MaxConnectionsPerIP bounds the connections from one client address,
	// the same way: an IPv4 address, an IPv6 /64, or (all of them at once)
	// the peers of a Unix socket. Default 512; 0 turns it off. Behind a
	// reverse proxy every caller has the proxy's address, so the proxy's
	// connections are capped at this many: turn it off there (the agent
	// logs this once at start when it is on and public_url is https).
	MaxConnectionsPerIP *int `yaml:"max_connections_per_ip"`
	// MaxInflightBodyBytes bounds the bytes of request bodies held at once,
	// across all requests; a request that would exceed it is answered 503
	// with Retry-After instead of waiting. At least limits.max_body_bytes.
	// Default 64 MiB.
	MaxInflightBodyBytes int64 `yaml:"max_inflight_body_bytes"`
}

// LogConfig sets the log output.
type LogConfig struct {
	// Level is debug, info, warn or error. Default info.
	Level string `yaml:"level"`
	// Format is text or json. Default text.
	Format string `yaml:"format"`
}

// SkillConfig is one skill on the card and the executor that performs it.
type SkillConfig struct {
	// ID names the skill on the card and in a message's handoff/skill
	// metadata; required, unique across the public and the extended card.
	ID string `yaml:"id"`
	// Name is the skill's human-readable name on the card; required.
	Name string `yaml:"name"`
	// Description says what the skill does, on the card.
	Description string `yaml:"description"`
	// Tags are keywords on the card; peers that delegate to this agent
	// narrow their choice by them. Default none.
	Tags []string `yaml:"tags"`
	// Examples are sample requests, on the card. Default none.
	Examples []string `yaml:"examples"`
	// InputModes are the media types the skill accepts, on the card.
	// Default: the agent's default_input_modes.
	InputModes []string `yaml:"input_modes"`
	// OutputModes are the media types the skill answers in, on the card.
	// Default: the agent's default_output_modes.
	OutputModes []string `yaml:"output_modes"`
	// Executor names what performs the skill: "tck" (the A2A test kit's
	// conformance behaviour), "mcp" (one MCP tool, named by Tool),
	// "delegate" (a verified peer, see Delegate), "go" (an executor the
	// program gives New with WithExecutor) or "model" (a model loop over the
	// agent's tools, see Model).
	Executor string `yaml:"executor"`
	// Tool is the namespaced MCP tool (server__tool) of an "mcp" skill.
	Tool string `yaml:"tool"`
	// Delegate says which peer skill fulfils a "delegate" skill and the
	// acceptance contract its completions must pass.
	Delegate *DelegateConfig `yaml:"delegate"`
	// Model is a "model" skill's loop: the endpoint it uses, its
	// instructions, the tools and delegate skills it may call, its limits.
	Model *model.SkillConfig `yaml:"model"`
	// Output gates the skill's own result before its task completes: a
	// JSON Schema, and an acceptance contract (the delegation contracts'
	// format) whose checks and verifiers the result must pass; a committed
	// result enters the ledger. Model, go, mcp and delegate skills take it.
	Output *OutputConfig `yaml:"output"`
	// ApprovalWhen is a CEL condition over the result (result.amount > 100)
	// that sends a result to an approver before its task completes. It
	// needs output.schema.
	ApprovalWhen string `yaml:"approval_when"`
}

// OutputConfig is a skill's output gate.
type OutputConfig struct {
	// Schema is the result's JSON Schema; required. A model skill finishes
	// by calling submit_result with it as the parameters; another skill's
	// result (its artifacts' first data part, else their text) must match it.
	// See README's "Output gates" for what the result is, skill by skill.
	Schema map[string]any `yaml:"schema"`
	// Contract is an acceptance contract file for the skill (relative to the
	// config file); its artifact "result" is the result, and the task's
	// other artifacts are there by their names. Optional.
	Contract string `yaml:"contract"`
}

// ModelConfig is one entry of models: an OpenAI-compatible Chat
// Completions endpoint. The API key is never in the file: APIKeyEnv names
// the environment variable it is read from.
type ModelConfig struct {
	// Name is what a model skill's use names the endpoint by; required,
	// unique.
	Name string `yaml:"name"`
	// BaseURL is the endpoint's base; requests go to BaseURL/chat/completions.
	// Required.
	BaseURL string `yaml:"base_url"`
	// Model is the model the requests ask for; required.
	Model string `yaml:"model"`
	// APIKeyEnv is optional: local servers (Ollama, llama.cpp) often want no key.
	APIKeyEnv string `yaml:"api_key_env"`
	// Timeout bounds each attempt. Default 60s.
	Timeout *Duration `yaml:"timeout"`
	// MaxRetries is how often a 429, 408, 409 or 5xx answer is retried,
	// honouring Retry-After. Default 2; 0 means never.
	MaxRetries *int `yaml:"max_retries"`
}

// endpoint is m as the model client takes it.
func (m ModelConfig) endpoint() model.Endpoint {
	e := model.Endpoint{Name: m.Name, BaseURL: m.BaseURL, Model: m.Model, APIKeyEnv: m.APIKeyEnv, MaxRetries: m.MaxRetries}
	if m.Timeout != nil {
		e.Timeout = m.Timeout.Duration
	}
	return e
}

// relative resolves a path the config names against the config file's
// directory (an absolute path stays as it is).
func (c *Config) relative(p string) string {
	if p == "" || filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(filepath.Dir(c.path), p)
}

// PeerConfigYAML is one peer agent and the keys its card must be signed
// with: pinned keys (a JWKS file, optionally narrowed to key ids), or jku
// URL prefixes whose JWKS is trusted.
type PeerConfigYAML struct {
	// Name names the peer in logs and in handoff peers; required.
	Name string `yaml:"name"`
	// URL is the peer's base URL, where its card is fetched; required.
	URL string `yaml:"url"`
	// Trust is the rule the peer's card must verify under: jwks_file, or
	// jku_prefixes, or both. A peer that does not verify is never used.
	Trust struct {
		// JWKSFile is a JWKS file of the peer's pinned public keys.
		JWKSFile string `yaml:"jwks_file"`
		// KeyIDs narrow the pinned keys to these key ids. Default: every
		// key in JWKSFile.
		KeyIDs []string `yaml:"key_ids"`
		// JKUPrefixes are http(s) URL prefixes: a card signed with a key
		// from a JWKS (its jku) under one of them is trusted.
		JKUPrefixes []string `yaml:"jku_prefixes"`
	} `yaml:"trust"`
}

// MCPServerConfig is one MCP server: stdio (command) or streamable HTTP (url).
type MCPServerConfig struct {
	// Name namespaces its tools: NAME__tool.
	Name string `yaml:"name"`
	// Transport is stdio (the default) or http.
	Transport string `yaml:"transport"`
	// Command starts a stdio server.
	Command string `yaml:"command"`
	// Args are Command's arguments, passed as they are, never expanded.
	Args []string `yaml:"args"`
	// Dir is a stdio server's working directory. Default: the agent's.
	Dir string `yaml:"dir"`
	// InheritEnv names the agent's variables the server sees besides PATH.
	InheritEnv []string `yaml:"inherit_env"`
	// Env sets variables; ${VAR} expands from the agent's environment.
	Env map[string]string `yaml:"env"`
	// URL is an http server's streamable HTTP endpoint.
	URL string `yaml:"url"`
	// Headers are sent to an http server; ${VAR} expands as in Env.
	Headers map[string]string `yaml:"headers"`
	// Allow are globs on the server's tool names (not namespaced): only the
	// tools that match one are used. Default: every tool.
	Allow []string `yaml:"allow"`
	// Deny are globs on the server's tool names whose tools are never
	// used, whatever Allow says. Default none.
	Deny []string `yaml:"deny"`
	// ConnectTimeout bounds starting the server, the handshake and the
	// first tool listing. Default 10s.
	ConnectTimeout *Duration `yaml:"connect_timeout"`
}

// ToolContractConfig is the local contract of a tool (or a glob of tools).
type ToolContractConfig struct {
	// Tool is server__tool or a glob; an exact name beats a glob, and the
	// longest glob wins.
	Tool string `yaml:"tool"`
	// Effect is read, write, destructive or external_send.
	Effect string `yaml:"effect"`
	// Risk is low or high.
	Risk string `yaml:"risk"`
	// Approval is none or mandatory.
	Approval string `yaml:"approval"`
	// Timeout bounds each call. Default 30s.
	Timeout *Duration `yaml:"timeout"`
	// Redact names arguments never stored, logged or shown.
	Redact []string `yaml:"redact"`
	// OutputSchema overrides the server's outputSchema.
	OutputSchema map[string]any `yaml:"output_schema"`
	// Idempotency says which calls share the idempotency key sent in the
	// call's _meta: none, task (same task and arguments) or arguments (same
	// arguments, any task). Default: none for read tools, task otherwise.
	Idempotency string `yaml:"idempotency"`
	// Resources say where the arguments name paths, URLs or ids, which the
	// policy sees in canonical form.
	Resources []policy.ResourceSpec `yaml:"resources"`
	// Tags are words a model skill's tool search ranks the tool by (MCP
	// tools carry none of their own); they decide nothing.
	Tags []string `yaml:"tags"`
}

// StoreConfig chooses the task store, and the keys that seal the push
// secrets it keeps.
type StoreConfig struct {
	// Kind is "embedded" (default: bbolt in DataDir) or "redis".
	Kind string `yaml:"kind"`
	// URL is the Redis URL (redis://[:PASSWORD@]HOST:PORT/DB or rediss://).
	URL string `yaml:"url"`
	// Namespace prefixes every key, so several agents share one Redis.
	// Default: the agent's name.
	Namespace string `yaml:"namespace"`
	// SecretKeyFiles name files of at least 32 bytes of random key material
	// (head -c 32 /dev/urandom > FILE) from which the keys that seal push
	// configs' tokens and credentials are derived: the first seals, every
	// one opens, so a rotation puts the new file first and keeps the old one
	// until the configs sealed under it are gone. Default: derived from the
	// signing keys (the one that signs now seals, every configured one
	// opens); kind redis needs this or signing.keys, which every replica
	// shares.
	SecretKeyFiles []string `yaml:"secret_key_files"`
	// LeaseTTL is how long a running task's lease outlives its replica on
	// Redis: a dead replica's tasks are taken over or failed within about
	// 1.5 lease_ttl. Default 6s; at least 1s; kind redis only.
	LeaseTTL *Duration `yaml:"lease_ttl"`
	// ClaimIdle is how long a push delivery a replica holds may go untouched
	// before another replica claims it. Default 15s; at least 1s; kind redis
	// only.
	ClaimIdle *Duration `yaml:"claim_idle"`
	// ArtifactsDir holds the peers' artifacts that delegate skills store,
	// content-addressed (each blob written to a temporary file, then
	// renamed), so replicas may share it on a shared volume and every
	// replica serves every blob. Default: data_dir/artifacts, this
	// process's alone.
	ArtifactsDir string `yaml:"artifacts_dir"`
}

// artifactsDir is where delegate skills keep the peers' artifacts.
func (c *Config) artifactsDir() string {
	if c.Store.ArtifactsDir != "" {
		return c.Store.ArtifactsDir
	}
	return filepath.Join(c.DataDir, datadir.Artifacts)
}

// claimIdle is ClaimIdle, or zero (the dispatcher's default) when unset.
func (s *StoreConfig) claimIdle() time.Duration {
	if s.ClaimIdle == nil {
		return 0
	}
	return s.ClaimIdle.Duration
}

// PushSettings tunes webhook delivery. Webhook URLs must be https and
// resolve to public addresses unless their host is allow-listed.
type PushSettings struct {
	// AllowHosts may be plain http and resolve to loopback or private
	// addresses: host names, IPs or CIDRs. Default: none.
	AllowHosts []string `yaml:"allow_hosts"`
	// MaxAttempts bounds the attempts to deliver one event. Default 8.
	MaxAttempts int `yaml:"max_attempts"`
	// MaxAge bounds how long one event is retried. Default 24h.
	MaxAge *Duration `yaml:"max_age"`
	// Timeout bounds one POST. Default 10s.
	Timeout *Duration `yaml:"timeout"`
	// RetryDelay is the first retry's delay, doubled each time up to 5m. Default 1s.
	RetryDelay *Duration `yaml:"retry_delay"`
}

// SigningConfig lists the card's signing keys for rotation: every key is
// published in the JWKS, the newest active one signs.
type SigningConfig struct {
	// Keys are the signing keys. Default: one Ed25519 key in
	// DataDir/signing-key.jwk, made at the first start.
	Keys []SigningKeyConfig `yaml:"keys"`
	// RetiredKeep is how long a retired key stays published. Default 168h.
	RetiredKeep *Duration `yaml:"retired_keep"`
}

// SigningKeyConfig is one private JWK file ("handoff keys gen" writes one).
type SigningKeyConfig struct {
	// File is the private JWK's path; required.
	File string `yaml:"file"`
	// NotBefore (RFC 3339) is when the key starts signing; publish a new key
	// ahead of it so peers' cached JWKS already holds it.
	NotBefore time.Time `yaml:"not_before"`
	// RetiredAt (RFC 3339) is when the key stops signing.
	RetiredAt time.Time `yaml:"retired_at"`
}

// AuthConfig lists the accepted credentials. They appear on the card as
// security schemes, and every A2A method, on every binding, requires one of
// them unless Anonymous is true.
type AuthConfig struct {
	// Anonymous serves callers without credentials; they share one owner.
	// Bad credentials are refused even then. Default false.
	Anonymous bool `yaml:"anonymous"`
	// APIKeyHeader is the header API keys travel in. Default X-API-Key.
	APIKeyHeader string `yaml:"api_key_header"`
	// APIKeys are accepted keys, known by their SHA-256 only
	// ("handoff keys hash" prints it).
	APIKeys []APIKeyConfig `yaml:"api_keys"`
	// JWTIssuers are trusted issuers of bearer JWTs.
	JWTIssuers []JWTIssuerConfig `yaml:"jwt_issuers"`
}

// APIKeyConfig is one accepted API key.
type APIKeyConfig struct {
	// Name identifies the caller (its principal is "key:NAME").
	Name string `yaml:"name"`
	// SHA256 is the hex SHA-256 of the key.
	SHA256 string `yaml:"sha256"`
	// Tenant binds the caller to a tenant; optional.
	Tenant string `yaml:"tenant"`
}

// JWTIssuerConfig is one trusted JWT issuer. Exactly one of JWKSURL and
// JWKSFile is set.
type JWTIssuerConfig struct {
	// Issuer is the iss claim a token must carry; required.
	Issuer string `yaml:"issuer"`
	// Audience must be in a token's aud claim; required.
	Audience string `yaml:"audience"`
	// JWKSURL is where the issuer's public keys are fetched.
	JWKSURL string `yaml:"jwks_url"`
	// JWKSFile is a file of the issuer's public keys.
	JWKSFile string `yaml:"jwks_file"`
	// JWKSMinRefresh is the least time between two fetches of jwks_url: a
	// token whose key id is not cached refetches at most this often, and a
	// failed fetch is retried no sooner. Cached keys never wait for a
	// fetch. Default 30s; at least 1s; jwks_url only.
	JWKSMinRefresh *Duration `yaml:"jwks_min_refresh"`
	// ClockSkew is allowed on exp, nbf and iat. Default 60s.
	ClockSkew *Duration `yaml:"clock_skew"`
	// TenantClaim names the claim carrying the caller's tenant; optional.
	TenantClaim string `yaml:"tenant_claim"`
}

// ExtendedCardConfig is what the extended card adds to the public one.
type ExtendedCardConfig struct {
	// Description replaces the public description when set.
	Description string `yaml:"description"`
	// Skills are listed after the public ones.
	Skills []SkillConfig `yaml:"skills"`
}

// DelegateConfig is the peer side of a delegated skill.
type DelegateConfig struct {
	// Skill is the peer skill's id; a verified peer that lists it is
	// chosen. Required.
	Skill string `yaml:"skill"`
	// Tags narrow the choice of peer to those whose skill has all of them.
	// Default none.
	Tags []string `yaml:"tags"`
	// Contract is the acceptance contract file (see the acceptance package).
	Contract string `yaml:"contract"`
	// Timeout is the delegation's deadline, sent in the envelope. Default 5m.
	Timeout *Duration `yaml:"timeout"`
	// Scopes are asked of the peer in the envelope.
	Scopes []string `yaml:"scopes"`
	// Reverify bounds how often an `unknown` decision is re-checked (with
	// backoff: 1s, 2s, 4s…) before it settles. Default 2; 0 settles at once.
	Reverify *int `yaml:"reverify"`
	// BlobThreshold is the size in bytes above which a raw part of the
	// peer's artifacts reaches our caller as a URL to GET /a2a/blobs/…
	// instead of inline. Default 65536; it must be positive.
	BlobThreshold *int64 `yaml:"blob_threshold"`
}

// DelegationConfig is how this agent receives delegated tasks.
type DelegationConfig struct {
	// MaxHops refuses envelopes that travelled further. Default 4.
	MaxHops int `yaml:"max_hops"`
	// GrantScopes are the scopes this agent grants; an envelope asking for
	// another is refused. Default none.
	GrantScopes []string `yaml:"grant_scopes"`
}

// Duration is a time.Duration written as in Go ("1m30s") in YAML.
type Duration struct {
	// Duration is the value read.
	time.Duration
}

// UnmarshalYAML implements yaml.Unmarshaler. Its errors are
// *yaml.TypeError, so that decoding goes on and reports the rest of the
// file's problems too.
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	var s string
	if err := n.Decode(&s); err != nil {
		return err
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return &yaml.TypeError{Errors: []string{fmt.Sprintf("line %d: %q is not a duration (like 30s or 2m)", n.Line, s)}}
	}
	if v < 0 {
		return &yaml.TypeError{Errors: []string{fmt.Sprintf("line %d: duration %q is negative", n.Line, s)}}
	}
	d.Duration = v
	return nil
}

// LoadConfig reads and checks one agent's YAML file. An unknown key, a bad
// value or a missing required one is an error naming the file, the key and
// its line; all problems are reported together.
func LoadConfig(path string) (*Config, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("%s: %w", path, ErrNoConfig)
	}
	if err != nil {
		return nil, fmt.Errorf("read config: %w", err)
	}
	defer f.Close()
	return ParseConfig(path, f)
}

// ParseConfig is [LoadConfig] on a reader; name is used in messages.
func ParseConfig(name string, r io.Reader) (*Config, error) {
	data, err := io.ReadAll(io.LimitReader(r, 1<<20))
	if err != nil {
		return nil, fmt.Errorf("read config %s: %w", name, err)
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	var c Config
	var decodeErrs []error // unknown keys, bad types and values: decoding goes on past them
	var doc yaml.Node      // the same document, for the lines of keys a check refuses
	if err := dec.Decode(&c); err != nil {
		var te *yaml.TypeError
		if !errors.As(err, &te) {
			if errors.Is(err, io.EOF) {
				return nil, fmt.Errorf("%s: the file is empty", name)
			}
			return nil, fmt.Errorf("%s: %s", name, strings.TrimPrefix(err.Error(), "yaml: "))
		}
		_ = yaml.Unmarshal(data, &doc)
		for _, msg := range te.Errors {
			decodeErrs = append(decodeErrs, decodeError(name, &doc, msg))
		}
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("%s: only one YAML document is allowed", name)
	}
	c.path = name
	c.applyDefaults()
	if doc.Kind == 0 {
		_ = yaml.Unmarshal(data, &doc)
	}
	if err := errors.Join(append(decodeErrs, c.validate(&doc))...); err != nil {
		return nil, err
	}
	return &c, nil
}

// decodeError turns one of yaml's "line N: message" into "file:N: key:
// message", with the key whose value is on that line when there is one.
func decodeError(name string, doc *yaml.Node, msg string) error {
	var line int
	if _, err := fmt.Sscanf(msg, "line %d:", &line); err != nil || line <= 0 {
		return fmt.Errorf("%s: %s", name, msg)
	}
	_, rest, _ := strings.Cut(msg, ": ")
	if field, ok := strings.CutPrefix(rest, "field "); ok && strings.Contains(field, " not found in type ") {
		rest = "is not a known key" // the type's Go name tells the reader nothing
	}
	if key := keyOnLine(doc, line, ""); key != "" {
		return fmt.Errorf("%s:%d: %s: %s", name, line, key, rest)
	}
	return fmt.Errorf("%s:%d: %s", name, line, rest)
}

// keyOnLine returns the path ("limits.shutdown_grace", "skills[0].id") of
// the innermost key on line (or whose value is), or "".
func keyOnLine(n *yaml.Node, line int, path string) string {
	switch n.Kind {
	case yaml.DocumentNode:
		for _, c := range n.Content {
			if k := keyOnLine(c, line, path); k != "" {
				return k
			}
		}
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			key, val := n.Content[i], n.Content[i+1]
			p := key.Value
			if path != "" {
				p = path + "." + key.Value
			}
			if val.Kind == yaml.ScalarNode && val.Line == line {
				return p
			}
			if k := keyOnLine(val, line, p); k != "" {
				return k
			}
			if key.Line == line { // a key whose value is a section
				return p
			}
		}
	case yaml.SequenceNode:
		for i, c := range n.Content {
			if k := keyOnLine(c, line, fmt.Sprintf("%s[%d]", path, i)); k != "" {
				return k
			}
		}
	}
	return ""
}

// lineOf returns the line of the key at path ("skills[1].executor") in doc,
// or of the nearest enclosing key the file has (a missing required key is
// reported where its parent is); 0 when the document has none of it.
func lineOf(doc *yaml.Node, path string) int {
	n := doc
	if n.Kind == yaml.DocumentNode && len(n.Content) > 0 {
		n = n.Content[0]
	}
	line := 0
	for _, part := range strings.Split(path, ".") {
		name, index, hasIndex := part, 0, false
		if i := strings.IndexByte(part, '['); i >= 0 && strings.HasSuffix(part, "]") {
			if _, err := fmt.Sscanf(part[i:], "[%d]", &index); err == nil {
				name, hasIndex = part[:i], true
			}
		}
		next := (*yaml.Node)(nil)
		if n.Kind == yaml.MappingNode {
			for k := 0; k+1 < len(n.Content); k += 2 {
				if n.Content[k].Value == name {
					line, next = n.Content[k].Line, n.Content[k+1]
				}
			}
		}
		if next == nil {
			return line
		}
		if hasIndex {
			if next.Kind != yaml.SequenceNode || index >= len(next.Content) {
				return line
			}
			next = next.Content[index]
			line = next.Line
		}
		n = next
	}
	return line
}

func (c *Config) applyDefaults() {
	if c.Listen == "" {
		c.Listen = "127.0.0.1:8080"
	}
	if c.DataDir == "" {
		c.DataDir = "data"
	}
	if c.Version == "" {
		c.Version = "0.1.0"
	}
	if c.Capabilities.Streaming == nil {
		on := true
		c.Capabilities.Streaming = &on
	}
	if c.Limits.MaxBodyBytes == 0 {
		c.Limits.MaxBodyBytes = 4 << 20
	}
	if c.Limits.MaxConcurrentTasks == 0 {
		c.Limits.MaxConcurrentTasks = 256
	}
	if c.Limits.ExecutorIdleTimeout == nil {
		c.Limits.ExecutorIdleTimeout = &Duration{2 * time.Minute}
	}
	if c.Limits.ShutdownGrace == nil {
		c.Limits.ShutdownGrace = &Duration{10 * time.Second}
	}
	if c.Server.ReadHeaderTimeout == nil {
		c.Server.ReadHeaderTimeout = &Duration{10 * time.Second}
	}
	if c.Server.ReadTimeout == nil {
		c.Server.ReadTimeout = &Duration{30 * time.Second}
	}
	if c.Server.IdleTimeout == nil {
		c.Server.IdleTimeout = &Duration{time.Minute}
	}
	if c.Server.MaxConnections == 0 {
		c.Server.MaxConnections = 4096
	}
	if c.Server.MaxConnectionsPerIP == nil {
		perIP := 512
		c.Server.MaxConnectionsPerIP = &perIP
	}
	if c.Server.MaxInflightBodyBytes == 0 {
		c.Server.MaxInflightBodyBytes = 64 << 20
	}
	if c.Store.Kind == "" {
		c.Store.Kind = "embedded"
	}
	if c.Store.Namespace == "" {
		c.Store.Namespace = strings.NewReplacer("{", "", "}", "").Replace(c.Name)
	}
	if c.Push.MaxAttempts == 0 {
		c.Push.MaxAttempts = 8
	}
	if c.Push.MaxAge == nil {
		c.Push.MaxAge = &Duration{24 * time.Hour}
	}
	if c.Push.Timeout == nil {
		c.Push.Timeout = &Duration{10 * time.Second}
	}
	if c.Push.RetryDelay == nil {
		c.Push.RetryDelay = &Duration{time.Second}
	}
	if c.Signing.RetiredKeep == nil {
		c.Signing.RetiredKeep = &Duration{7 * 24 * time.Hour}
	}
	if c.Auth.APIKeyHeader == "" {
		c.Auth.APIKeyHeader = auth.DefaultAPIKeyHeader
	}
	for i := range c.Auth.JWTIssuers {
		if c.Auth.JWTIssuers[i].ClockSkew == nil {
			c.Auth.JWTIssuers[i].ClockSkew = &Duration{time.Minute}
		}
	}
	if c.Log.Level == "" {
		c.Log.Level = "info"
	}
	if c.Log.Format == "" {
		c.Log.Format = "text"
	}
	if len(c.DefaultInputModes) == 0 {
		c.DefaultInputModes = []string{"text/plain"}
	}
	if len(c.DefaultOutputModes) == 0 {
		c.DefaultOutputModes = []string{"text/plain"}
	}
}

// executors are the built-in executor kinds a skill may name.
var executorKinds = []string{"tck", "mcp", "delegate", "go", "model"}

func (c *Config) validate(doc *yaml.Node) error {
	var errs []error
	bad := func(key, format string, args ...any) {
		where := c.path
		if line := lineOf(doc, key); line > 0 {
			where = fmt.Sprintf("%s:%d", c.path, line)
		}
		errs = append(errs, fmt.Errorf("%s: %s: %s", where, key, fmt.Sprintf(format, args...)))
	}
	if c.Name == "" {
		bad("name", "is required")
	}
	if c.Description == "" {
		bad("description", "is required")
	}
	if c.PublicURL != "" {
		if u, err := url.Parse(c.PublicURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			bad("public_url", "%q is not an http(s) URL", c.PublicURL)
		}
	}
	if c.Limits.MaxBodyBytes < 1024 {
		bad("limits.max_body_bytes", "%d is below the minimum of 1024", c.Limits.MaxBodyBytes)
	}
	if c.Limits.MaxConcurrentTasks < 1 {
		bad("limits.max_concurrent_tasks", "must be at least 1")
	}
	if t := c.Console.SessionTTL; t != nil && t.Duration < time.Minute {
		bad("console.session_ttl", "%s is under the minimum of 1m", t.Duration)
	}
	c.Retention.validate(bad)
	if err := c.MCPServer.validate(); err != nil {
		bad("mcp_server.path", "%v", err)
	}
	if err := c.Metrics.validate(); err != nil {
		bad("metrics.listen", "%v", err)
	}
	for _, d := range []struct {
		key string
		d   *Duration
	}{{"server.read_header_timeout", c.Server.ReadHeaderTimeout}, {"server.read_timeout", c.Server.ReadTimeout}, {"server.idle_timeout", c.Server.IdleTimeout}} {
		if d.d != nil && d.d.Duration < 100*time.Millisecond {
			bad(d.key, "%s is under the minimum of 100ms", d.d.Duration)
		}
	}
	if c.Server.MaxConnections < 16 {
		bad("server.max_connections", "%d is below the minimum of 16", c.Server.MaxConnections)
	}
	if perIP := *c.Server.MaxConnectionsPerIP; perIP < 0 || perIP > c.Server.MaxConnections {
		bad("server.max_connections_per_ip", "%d is not between 0 (no cap) and server.max_connections (%d)", perIP, c.Server.MaxConnections)
	}
	if c.Server.MaxInflightBodyBytes < c.Limits.MaxBodyBytes {
		bad("server.max_inflight_body_bytes", "%d is below limits.max_body_bytes (%d): a body of the largest size could never be read",
			c.Server.MaxInflightBodyBytes, c.Limits.MaxBodyBytes)
	}
	switch c.Log.Level {
	case "debug", "info", "warn", "error":
	default:
		bad("log.level", "%q is not one of debug, info, warn, error", c.Log.Level)
	}
	switch c.Log.Format {
	case "text", "json":
	default:
		bad("log.format", "%q is not one of text, json", c.Log.Format)
	}
	if len(c.Skills) == 0 {
		bad("skills", "at least one skill is required")
	}
	if !c.Auth.Anonymous && len(c.Auth.APIKeys) == 0 && len(c.Auth.JWTIssuers) == 0 {
		bad("auth", "no caller could ever be served: set anonymous: true, or configure api_keys or jwt_issuers")
	}
	switch c.Store.Kind {
	case "embedded":
		if c.Store.URL != "" {
			bad("store.url", "is only for kind redis")
		}
		if c.Store.LeaseTTL != nil {
			bad("store.lease_ttl", "is only for kind redis")
		}
		if c.Store.ClaimIdle != nil {
			bad("store.claim_idle", "is only for kind redis")
		}
	case "redis":
		if !strings.HasPrefix(c.Store.URL, "redis://") && !strings.HasPrefix(c.Store.URL, "rediss://") {
			bad("store.url", "kind redis needs a redis:// or rediss:// URL")
		}
	default:
		bad("store.kind", "%q is not one of embedded, redis", c.Store.Kind)
	}
	for _, d := range []struct {
		key string
		d   *Duration
	}{{"store.lease_ttl", c.Store.LeaseTTL}, {"store.claim_idle", c.Store.ClaimIdle}} {
		if d.d != nil && d.d.Duration < time.Second {
			bad(d.key, "%s is under the minimum of 1s", d.d.Duration)
		}
	}
	for i, f := range c.Store.SecretKeyFiles {
		if f == "" {
			bad(fmt.Sprintf("store.secret_key_files[%d]", i), "is empty")
		}
	}
	if c.Push.MaxAttempts < 1 {
		bad("push.max_attempts", "must be at least 1")
	}
	if c.Push.Timeout.Duration <= 0 {
		bad("push.timeout", "must be positive")
	}
	for i, k := range c.Signing.Keys {
		if k.File == "" {
			bad(fmt.Sprintf("signing.keys[%d].file", i), "is required")
		}
	}
	for i, k := range c.Auth.APIKeys {
		key := fmt.Sprintf("auth.api_keys[%d]", i)
		if k.Name == "" {
			bad(key+".name", "is required")
		}
		if _, err := auth.ParseAPIKeyHash(k.SHA256); err != nil {
			bad(key+".sha256", "%v", err)
		}
	}
	for i, j := range c.Auth.JWTIssuers {
		key := fmt.Sprintf("auth.jwt_issuers[%d]", i)
		if j.Issuer == "" {
			bad(key+".issuer", "is required")
		}
		if j.Audience == "" {
			bad(key+".audience", "is required")
		}
		if (j.JWKSURL == "") == (j.JWKSFile == "") {
			bad(key, "set exactly one of jwks_url and jwks_file")
		}
		if j.JWKSMinRefresh != nil && j.JWKSURL == "" {
			bad(key+".jwks_min_refresh", "is only for jwks_url")
		} else if j.JWKSMinRefresh != nil && j.JWKSMinRefresh.Duration < time.Second {
			bad(key+".jwks_min_refresh", "%s is under the minimum of 1s", j.JWKSMinRefresh.Duration)
		}
	}
	// The extended card's skills run like the public ones and are held to
	// the same rules; ids are unique across both.
	seen := map[string]bool{}
	checkSkills := func(prefix string, skills []SkillConfig) {
		for i, s := range skills {
			key := fmt.Sprintf("%s[%d]", prefix, i)
			if s.ID == "" {
				bad(key+".id", "is required")
			} else if seen[s.ID] {
				bad(key+".id", "%q is used by another skill", s.ID)
			}
			seen[s.ID] = true
			if s.Name == "" {
				bad(key+".name", "is required")
			}
			if !slices.Contains(executorKinds, s.Executor) {
				bad(key+".executor", "%q is not one of %s", s.Executor, strings.Join(executorKinds, ", "))
			}
			if (s.Executor == "mcp") != (s.Tool != "") {
				bad(key+".tool", "an mcp skill names exactly one tool (server__tool); other skills name none")
			}
			if (s.Executor == "delegate") != (s.Delegate != nil) {
				bad(key+".delegate", "a delegate skill has a delegate section (skill, contract); other skills have none")
			} else if s.Delegate != nil && (s.Delegate.Skill == "" || s.Delegate.Contract == "") {
				bad(key+".delegate", "skill and contract are required")
			} else if s.Delegate != nil && s.Delegate.BlobThreshold != nil && *s.Delegate.BlobThreshold <= 0 {
				bad(key+".delegate.blob_threshold", "%d is not a positive number of bytes", *s.Delegate.BlobThreshold)
			}
			if (s.Executor == "model") != (s.Model != nil) {
				bad(key+".model", "a model skill has a model section (use, instructions, tools); other skills have none")
			}
			if s.ApprovalWhen != "" {
				if s.Output == nil {
					bad(key+".approval_when", "needs output (a schema for the result it reads)")
				} else if _, err := skill.CompileApprovalWhen(s.ApprovalWhen); err != nil {
					bad(key+".approval_when", "%v", err)
				}
			}
			if o := s.Output; o != nil {
				switch {
				case s.Executor == "tck":
					bad(key+".output", "a tck skill has no output gate (model, go, mcp and delegate skills do)")
				case o.Schema == nil:
					bad(key+".output.schema", "is required")
				default:
					if _, err := skill.CompileOutputSchema(o.Schema); err != nil {
						bad(key+".output.schema", "%v", err)
					}
				}
				if o.Contract != "" {
					if st, err := os.Stat(c.relative(o.Contract)); err != nil || st.IsDir() {
						bad(key+".output.contract", "%s is not a readable file", c.relative(o.Contract))
					}
				}
			}
		}
	}
	checkSkills("skills", c.Skills)
	if c.ExtendedCard != nil {
		checkSkills("extended_card.skills", c.ExtendedCard.Skills)
	}
	c.validateModels(bad)
	for i, p := range c.Peers {
		key := fmt.Sprintf("peers[%d]", i)
		if p.Name == "" || p.URL == "" {
			bad(key, "name and url are required")
		}
		if p.Trust.JWKSFile == "" && len(p.Trust.JKUPrefixes) == 0 {
			bad(key+".trust", "pin keys (jwks_file) or trust jku_prefixes: an unverified peer is never used")
		}
	}
	for i, m := range c.MCPServers {
		key := fmt.Sprintf("mcp_servers[%d]", i)
		if m.Name == "" || strings.Contains(m.Name, "__") {
			bad(key+".name", "is required and may not contain \"__\"")
		}
		switch m.Transport {
		case "", "stdio":
			if m.Command == "" {
				bad(key+".command", "a stdio server needs a command")
			}
		case "http":
			if m.URL == "" {
				bad(key+".url", "an http server needs a url")
			}
		default:
			bad(key+".transport", "%q is not stdio or http", m.Transport)
		}
	}
	for i, tc := range c.ToolContracts {
		key := fmt.Sprintf("tool_contracts[%d]", i)
		if tc.Tool == "" {
			bad(key+".tool", "is required")
		}
		if !slices.Contains([]string{"read", "write", "destructive", "external_send"}, tc.Effect) {
			bad(key+".effect", "%q is not one of read, write, destructive, external_send", tc.Effect)
		}
		if !slices.Contains([]string{"low", "high"}, tc.Risk) {
			bad(key+".risk", "%q is not low or high", tc.Risk)
		}
		if !slices.Contains([]string{"none", "mandatory"}, tc.Approval) {
			bad(key+".approval", "%q is not none or mandatory", tc.Approval)
		}
		if !slices.Contains([]string{"", "none", "task", "arguments"}, tc.Idempotency) {
			bad(key+".idempotency", "%q is not none, task or arguments", tc.Idempotency)
		}
	}
	c.validatePolicy(bad)
	return errors.Join(errs...)
}

// validateModels checks the models list and every model skill's model
// section: the endpoint it uses, its delegates (delegate skills of this
// agent), and the files it names (relative to the config file).
func (c *Config) validateModels(bad func(key, format string, args ...any)) {
	var names []string
	for i, m := range c.Models {
		key := fmt.Sprintf("models[%d]", i)
		for _, fe := range m.endpoint().Validate() {
			bad(key+"."+fe.Field, "%s", fe.Msg)
		}
		if slices.Contains(names, m.Name) {
			bad(key+".name", "%q is used by another model", m.Name)
		}
		names = append(names, m.Name)
	}
	delegates := map[string]bool{}
	for _, s := range allSkills(c) {
		if s.Executor == "delegate" {
			delegates[s.ID] = true
		}
	}
	type keyed struct {
		key string
		s   SkillConfig
	}
	var skills []keyed
	for i, s := range c.Skills {
		skills = append(skills, keyed{fmt.Sprintf("skills[%d]", i), s})
	}
	if c.ExtendedCard != nil {
		for i, s := range c.ExtendedCard.Skills {
			skills = append(skills, keyed{fmt.Sprintf("extended_card.skills[%d]", i), s})
		}
	}
	for _, k := range skills {
		s := k.s
		if s.Executor == "model" && s.Model == nil && strings.HasPrefix(k.key, "extended_card") {
			bad(k.key+".model", "a model skill has a model section (use, instructions, tools)")
		}
		if s.Model == nil {
			continue
		}
		key := k.key + ".model"
		for _, fe := range s.Model.Validate(names) {
			bad(key+"."+fe.Field, "%s", fe.Msg)
		}
		for j, d := range s.Model.Delegates {
			if d != "" && !delegates[d] {
				bad(fmt.Sprintf("%s.delegates[%d]", key, j), "%q is not a delegate skill of this agent", d)
			}
		}
		if f := s.Model.InstructionsFile; f != "" {
			if st, err := os.Stat(c.relative(f)); err != nil || st.IsDir() {
				bad(key+".instructions_file", "%s is not a readable file", c.relative(f))
			}
		}
		if d := s.Model.SkillsDir; d != "" {
			if st, err := os.Stat(c.relative(d)); err != nil || !st.IsDir() {
				bad(key+".skills_dir", "%s is not a directory", c.relative(d))
			}
		}
	}
}

// Hazards returns what the config allows that is likely a risk, one
// sentence each, naming the file or key: files holding secrets that others
// may read, and push allow-list entries that open the whole internet or
// private ranges. handoff serve logs each as a warning; none stops it.
func (c *Config) Hazards() []string {
	var out []string
	exposed := func(path, what string) {
		info, err := os.Stat(path)
		if err != nil || info.Mode().Perm()&0o044 == 0 {
			return // a file that cannot be read is New's to report
		}
		out = append(out, fmt.Sprintf("%s: %s is readable by group or others (mode %04o); chmod 600 it", path, what, info.Mode().Perm()))
	}
	if c.path != "" {
		exposed(c.path, "the config file")
	}
	for i, k := range c.Signing.Keys {
		exposed(k.File, fmt.Sprintf("signing.keys[%d].file", i))
	}
	if len(c.Signing.Keys) == 0 {
		exposed(filepath.Join(c.DataDir, datadir.SigningKey), "the default signing key")
	}
	for i, f := range c.Store.SecretKeyFiles {
		exposed(f, fmt.Sprintf("store.secret_key_files[%d]", i))
	}
	for i, h := range c.Push.AllowHosts {
		if hazard := allowHostHazard(h); hazard != "" {
			out = append(out, fmt.Sprintf("push.allow_hosts[%d]: %q %s", i, h, hazard))
		}
	}
	return out
}

// privateRanges are the ranges a webhook has no business reaching unless
// the operator means it: internal networks, shared address space, link-local
// (where cloud metadata services answer). Loopback is not here: allowing it
// is how a local receiver is reached, and the tests do.
var privateRanges = []netip.Prefix{
	netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("172.16.0.0/12"),
	netip.MustParsePrefix("192.168.0.0/16"), netip.MustParsePrefix("100.64.0.0/10"),
	netip.MustParsePrefix("169.254.0.0/16"), netip.MustParsePrefix("fc00::/7"),
	netip.MustParsePrefix("fe80::/10"),
}

// allowHostHazard says what is risky in one push.allow_hosts entry, or "".
func allowHostHazard(entry string) string {
	h := strings.Trim(strings.TrimSpace(entry), "[]")
	if strings.Contains(h, "*") {
		return "is not a pattern: entries are exact host names, addresses or CIDRs, and no host is named \"*\""
	}
	p, err := netip.ParsePrefix(h)
	if err != nil {
		a, aerr := netip.ParseAddr(h)
		if aerr != nil {
			return "" // a host name: it allows that name only
		}
		a = a.Unmap()
		p = netip.PrefixFrom(a, a.BitLen())
	}
	p = p.Masked()
	if p.Bits() == 0 {
		return "allows the whole internet, private and link-local addresses included"
	}
	for _, r := range privateRanges {
		if p.Overlaps(r) {
			return fmt.Sprintf("allows private addresses (%s)", r)
		}
	}
	return ""
}
