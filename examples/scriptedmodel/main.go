// Command scriptedmodel is a deterministic OpenAI-compatible Chat Completions server for tests
// and the demo: it answers by a script of rules (see package script) instead of a model.
//
//	go run ./examples/scriptedmodel --script examples/scriptedmodel/notes.yaml --listen 127.0.0.1:0
//
// Its first stdout line is the base URL to configure (http://ADDR/v1).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/handoff-a2a/handoff/examples/scriptedmodel/script"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "scriptedmodel:", err)
		os.Exit(1)
	}
}

// run serves the script until ctx is done, writing its base URL as the first line of stdout.
func run(ctx context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("scriptedmodel", flag.ContinueOnError)
	file := fs.String("script", "", "the script `FILE` (YAML or JSON)")
	listen := fs.String("listen", "127.0.0.1:0", "listen on `ADDR`")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *file == "" {
		return errors.New("--script is required")
	}
	s, err := script.Load(*file)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "http://%s/v1\n", ln.Addr())
	hs := &http.Server{Handler: script.NewServer(s), ReadHeaderTimeout: 10 * time.Second}
	served := make(chan error, 1)
	go func() { served <- hs.Serve(ln) }()
	select {
	case err := <-served:
		return err
	case <-ctx.Done():
	}
	shut, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := hs.Shutdown(shut); err != nil {
		return err
	}
	if err := <-served; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
