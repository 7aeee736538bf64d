package bench

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"time"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/handoff-a2a/handoff/internal/model"
	"github.com/handoff-a2a/handoff/mcp"
)

// sdkNotifyDelay is how long the MCP SDK's server holds a list_changed
// notification to coalesce changes (go-sdk's notificationDelay): part of
// every publication the catalog curve times, and none of Handoff's.
const sdkNotifyDelay = 10 * time.Millisecond

// catalogChanges is how many tool additions each catalog point times.
const catalogChanges = 5

// searchQuery is the tool search the catalog curve times: every tool
// matches two of its words, so every tool is scored and sorted.
const searchQuery = "report the serial of gadget 1234"

type gadgetArgs struct{}

func addGadget(srv *mcpsdk.Server, name string, i int) {
	mcpsdk.AddTool(srv, &mcpsdk.Tool{Name: name, Description: fmt.Sprintf("Gadget number %d of the workshop: reports its serial.", i)},
		func(context.Context, *mcpsdk.CallToolRequest, gadgetArgs) (*mcpsdk.CallToolResult, any, error) {
			return &mcpsdk.CallToolResult{Content: []mcpsdk.Content{&mcpsdk.TextContent{Text: fmt.Sprint(i)}}}, nil, nil
		})
}

// runCatalog serves, at each size n, an MCP server of n tools over real
// HTTP to an MCP manager, and times the publication of a new catalog
// snapshot after the server adds a tool, and the model executor's tool
// search over the snapshot.
func runCatalog(ctx context.Context, opts ScaleOptions, cr *CurveReport) error {
	for _, n := range opts.Sizes[CurveCatalog] {
		started := time.Now()
		pctx, cancel := context.WithTimeout(ctx, opts.PointTimeout)
		p := Point{Size: n}
		err := catalogPoint(pctx, opts, n, &p)
		ended := endPoint(ctx, pctx, opts, cr, p, started, err)
		cancel()
		if ended {
			return nil // the larger sizes would fail too, or take longer
		}
	}
	return nil
}

func catalogPoint(ctx context.Context, opts ScaleOptions, n int, p *Point) (err error) {
	srv := mcpsdk.NewServer(&mcpsdk.Implementation{Name: "gadgets", Version: "1"}, nil)
	for i := range n {
		addGadget(srv, fmt.Sprintf("gadget_%05d", i), i)
	}
	base, stop, err := startHTTP(mcpsdk.NewStreamableHTTPHandler(func(*http.Request) *mcpsdk.Server { return srv }, nil))
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, stop()) }()
	m, err := mcp.NewManager([]mcp.ServerConfig{{Name: "gadgets", Transport: mcp.TransportHTTP, URL: base}}, mcp.WithLogger(quietLog))
	if err != nil {
		return err
	}
	mctx, cancel := context.WithCancel(ctx)
	ran := make(chan error, 1)
	go func() { ran <- m.Run(mctx) }()
	defer func() {
		cancel()
		if rerr := <-ran; rerr != nil && !errors.Is(rerr, context.Canceled) {
			err = errors.Join(err, rerr)
		}
	}()
	waitTools := func(want int) (*mcp.Snapshot, error) {
		for {
			updated := m.Updated()
			if s := m.Snapshot(); s != nil && len(s.Tools) == want {
				return s, nil
			}
			select {
			case <-updated:
			case <-ctx.Done():
				return nil, errPointTimeout
			}
		}
	}
	snap, err := waitTools(n)
	if err != nil {
		return err
	}
	var ds []time.Duration
	for k := range catalogChanges {
		t0 := time.Now()
		addGadget(srv, fmt.Sprintf("extra_%d", k), n+k)
		if snap, err = waitTools(n + k + 1); err != nil {
			return err
		}
		ds = append(ds, time.Since(t0))
	}
	slices.Sort(ds)
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	p.set("publish_ms", ms(percentile(ds, 50)))
	p.set("publish_minus_sdk_delay_ms", ms(percentile(ds, 50)-sdkNotifyDelay))

	tools := make([]model.Tool, len(snap.Tools))
	for i, t := range snap.Tools {
		tools[i] = model.Tool{Name: t.Name, Description: t.Definition.Description}
	}
	searches, err := timed(ctx, opts.Measure, 2000, func() error {
		if hits := model.Search(tools, searchQuery); len(hits) == 0 {
			return errors.New("tool search found nothing")
		}
		return nil
	})
	if err != nil {
		return err
	}
	p.set("search_ms", micros(searches)/1000)
	return nil
}
