// Package bench measures Handoff against a2a-go's own server and against
// the machine's limit, in one process and one run.
//
// [Run] starts three targets on ephemeral 127.0.0.1 ports:
//
//	handoff  the conformance agent through handoff.New and Agent.Serve, on
//	         its durable bbolt store in a temporary directory
//	sdk      a2a-go's a2asrv handler (in-memory store) behind its JSON-RPC
//	         handler, and behind its grpc-go binding for the gRPC scenario,
//	         with the same executor (internal/tck)
//	limit    a net/http handler answering a fixed body recorded from
//	         Handoff: what the HTTP stack and the load generator cost alone
//
// and drives each with every scenario ([Scenarios]) at each concurrency for
// a fixed duration, from a load generator in the same process: raw net/http
// for JSON-RPC (HTTP/1.1 keep-alive, one connection per worker), a connect
// client over HTTP/2 cleartext for gRPC.
//
// Because the generator and all three targets share the process, allocation
// and memory figures are process-wide: the allocations per request of a
// target are reported net of the limit's (generator plus a trivial handler)
// in the same cell, and peak RSS is the process's high-water mark during
// the target's turns in the cell, reset before each turn. Within a cell the
// targets take turns, several rounds of them, so that a drift of the
// machine's speed touches the three alike.
//
// [Goals] are the figures Handoff is expected to reach; [Report.Missed]
// lists those it did not.
//
// [RunReplicas] measures blocking sends on one agent on the embedded store,
// one on Redis and several replicas on one Redis namespace, in one run and
// this process; BenchmarkReplicas prints its table for the README.
//
// [RunScale] (handoff bench --scale) measures how the cost grows with the
// work, one [Curve] at a time, each at growing sizes: events per task,
// stored tasks, idle subscribers, MCP tools in the catalog, and sends on
// Redis. Each figure is printed against the same figure at the curve's
// smallest size in the same run, and [ScaleGoals] are its targets. Each
// point is bounded in time ([ScaleOptions].PointTimeout); a point past its
// bound, or failed, ends its curve and misses the curve's targets.
// BenchmarkScale runs the same curves under go test.
package bench
