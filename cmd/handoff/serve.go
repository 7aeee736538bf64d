package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/handoff-a2a/handoff"
)

// runServe runs one agent until ctx ends (SIGINT or SIGTERM). SIGHUP
// reloads the config's MCP part (see [handoff.Agent.Reload]).
func runServe(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("serve", stdout)
	configPath := fs.String("config", "", "the agent's YAML config `FILE` (required)")
	listen := fs.String("listen", "", "TCP `ADDR` to serve on; overrides the config's listen")
	dataDir := fs.String("data-dir", "", "data `DIR` (task store, ledger, audit log, signing key); overrides the config's data_dir")
	store := fs.String("store", "", "keep tasks in Redis at this URL (`redis://HOST:PORT/DB`); overrides the config's store")
	rest, err := parseInterleaved(fs, args)
	if err != nil {
		return err
	}
	if len(rest) > 0 {
		return usagef("serve: unexpected argument %q", rest[0])
	}
	if *configPath == "" {
		return usagef("serve: --config is required")
	}
	// The flags override the file on every load, so that a reload compares
	// like with like.
	load := func() (*handoff.Config, error) {
		cfg, err := handoff.LoadConfig(*configPath)
		if err != nil {
			return nil, err
		}
		if *listen != "" {
			cfg.Listen = *listen
		}
		if *dataDir != "" {
			cfg.DataDir = *dataDir
		}
		if *store != "" {
			cfg.Store.Kind, cfg.Store.URL = "redis", *store
		}
		return cfg, nil
	}
	if *store != "" && !strings.HasPrefix(*store, "redis://") && !strings.HasPrefix(*store, "rediss://") {
		return usagef("serve: --store %q is not a redis:// URL", *store)
	}
	// SIGHUP is caught before anything starts, so that an early one cannot
	// kill the agent; it reloads the config once the agent serves.
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	cfg, err := load()
	if err != nil {
		return err
	}
	logger := handoff.NewLogger(cfg)
	// The task store's open and recovery warnings (a torn log tail dropped)
	// go to the default logger: make it the agent's, so they share its format.
	slog.SetDefault(logger)
	for _, h := range cfg.Hazards() {
		logger.Warn("config hazard", slog.String("hazard", h))
	}
	agent, err := handoff.New(ctx, cfg, handoff.WithLogger(logger))
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		agent.Close()
		return fmt.Errorf("listen on %s: %w", cfg.Listen, err)
	}
	served, reloads := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(reloads)
		for {
			select {
			case <-served:
				return
			case <-hup:
				reload(agent, load, logger)
			}
		}
	}()
	err = agent.Serve(ctx, ln)
	close(served)
	<-reloads
	return err
}

// reload re-reads the config on SIGHUP and applies what the agent can apply
// while it serves; a config that does not load or is refused leaves the one
// in force unchanged.
func reload(agent *handoff.Agent, load func() (*handoff.Config, error), logger *slog.Logger) {
	logger.Info("config reload requested (SIGHUP)")
	next, err := load()
	if err == nil {
		err = agent.Reload(next)
	}
	if err != nil {
		logger.Error("config reload refused; the config in force is unchanged", slog.Any("error", err))
	}
}
