package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"strings"

	"github.com/handoff-a2a/handoff"
)

// runServe runs one agent until ctx ends (SIGINT or SIGTERM).
func runServe(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("serve", "--config FILE [--listen ADDR] [--data-dir DIR] [--store redis://HOST:PORT/DB]", stdout)
	configPath := fs.String("config", "", "the agent's YAML config `file` (required)")
	listen := fs.String("listen", "", "TCP `address` to serve on; overrides the config's listen")
	dataDir := fs.String("data-dir", "", "`directory` for the task store; overrides the config's data_dir")
	store := fs.String("store", "", "keep tasks in Redis at this `URL` (redis://HOST:PORT/DB); overrides the config's store")
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
	cfg, err := handoff.LoadConfig(*configPath)
	if err != nil {
		return err
	}
	if *listen != "" {
		cfg.Listen = *listen
	}
	if *dataDir != "" {
		cfg.DataDir = *dataDir
	}
	if *store != "" {
		if !strings.HasPrefix(*store, "redis://") && !strings.HasPrefix(*store, "rediss://") {
			return usagef("serve: --store %q is not a redis:// URL", *store)
		}
		cfg.Store.Kind, cfg.Store.URL = "redis", *store
	}
	agent, err := handoff.New(ctx, cfg)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		agent.Close()
		return fmt.Errorf("listen on %s: %w", cfg.Listen, err)
	}
	return agent.Serve(ctx, ln)
}
