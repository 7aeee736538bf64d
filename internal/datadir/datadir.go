package datadir

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// The names of an agent's files in its data directory. An embedded agent
// creates TaskStore at its first start; the others appear when the agent
// needs them.
const (
	// TaskStore is the embedded task store (bbolt). Its write-ahead log's
	// segments lie beside it, their names beginning with TaskStore.
	TaskStore = "tasks.db"
	// Ledger is the acceptance gate's commit ledger with the index of
	// delegations, made when a skill delegates.
	Ledger = "ledger.db"
	// AuditLog is the MCP tool calls' audit log, made when the agent has
	// MCP servers.
	AuditLog = "audit.db"
	// ExecutorState is what executors keep of unfinished tasks out of the
	// tasks' sight (a model skill's conversation), made when a skill has
	// executor: model.
	ExecutorState = "executor-state.db"
	// SigningKey is the card signing key the agent makes at its first
	// start when the config names none.
	SigningKey = "signing-key.jwk"
	// Artifacts is the directory of the peers' artifacts, by digest, unless
	// the config puts them elsewhere (store.artifacts_dir).
	Artifacts = "artifacts"
)

// ErrNoAgentData is the error of [Check] for a directory that is missing or
// holds none of an agent's stores.
var ErrNoAgentData = errors.New("no agent data")

// Check returns nil when dir holds the data of an agent on the embedded
// store: its task store, the task store's log, its ledger or its audit log.
// Otherwise it returns an error wrapping [ErrNoAgentData] that names dir. A
// signing key alone does not count: an agent on Redis keeps one here and its
// stores in Redis.
func Check(dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("read data directory: %w", err)
	}
	for _, e := range entries {
		if n := e.Name(); strings.HasPrefix(n, TaskStore) || n == Ledger || n == AuditLog {
			return nil
		}
	}
	return fmt.Errorf("%w in %s", ErrNoAgentData, dir)
}

// Find returns the path of the file name in dir, or "" when dir holds an
// agent's data but not that file (the ledger of an agent that never
// delegated), so that a reader can report nothing without creating the
// file. When dir holds no agent data, Find returns Check's error.
func Find(dir, name string) (string, error) {
	if err := Check(dir); err != nil {
		return "", err
	}
	path := filepath.Join(dir, name)
	_, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("data directory: %w", err)
	}
	return path, nil
}
