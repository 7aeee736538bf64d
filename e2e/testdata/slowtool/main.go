// Command slowtool is an MCP server on stdio with one tool, work, that
// holds a peer's task open until a file appears: the e2e restart test
// kills the delegating agent while the peer works, then lets the work end.
package main

import (
	"context"
	"fmt"
	"log"
	"os"
	"time"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

type workArgs struct {
	UntilFile string `json:"until_file" jsonschema:"finish once this file exists"`
	CallsFile string `json:"calls_file" jsonschema:"append one line per call to this file"`
}

type receipt struct {
	Receipt string `json:"receipt" jsonschema:"the work's receipt"`
}

func work(ctx context.Context, _ *mcpsdk.CallToolRequest, a workArgs) (*mcpsdk.CallToolResult, receipt, error) {
	f, err := os.OpenFile(a.CallsFile, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		return nil, receipt{}, fmt.Errorf("open calls file: %w", err)
	}
	_, err = fmt.Fprintln(f, "call")
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, receipt{}, fmt.Errorf("record call: %w", err)
	}
	tick := time.NewTicker(20 * time.Millisecond) // polling: file events differ by platform
	defer tick.Stop()
	for {
		if _, err := os.Stat(a.UntilFile); err == nil {
			return nil, receipt{Receipt: "rcpt-" + time.Now().UTC().Format("150405.000")}, nil
		}
		select {
		case <-ctx.Done():
			return nil, receipt{}, ctx.Err()
		case <-tick.C:
		}
	}
}

func main() {
	srv := mcpsdk.NewServer(&mcpsdk.Implementation{Name: "slowtool", Version: "1.0.0"}, nil)
	mcpsdk.AddTool(srv, &mcpsdk.Tool{Name: "work", Description: "Work until a file appears, then answer with a receipt."}, work)
	if err := srv.Run(context.Background(), &mcpsdk.StdioTransport{}); err != nil {
		log.Fatal(err)
	}
}
