package mcp

import mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

// WithTransportForTest connects the named server through dial instead of its configured
// transport, so that tests can use in-memory transports.
func WithTransportForTest(server string, dial func() (mcpsdk.Transport, error)) ManagerOption {
	return managerOptionFunc(func(c *config) {
		if c.dial == nil {
			c.dial = map[string]func() (mcpsdk.Transport, error){}
		}
		c.dial[server] = dial
	})
}

// PublishForTest builds the tools of one listing of server and their snapshot the way a
// relist does, reusing the tools of prev whose definitions did not change.
func PublishForTest(server string, defs []*mcpsdk.Tool, prev *Snapshot) (*Snapshot, error) {
	var old map[string]*Tool
	if prev != nil {
		old = prev.byName
	}
	tools := make([]*Tool, 0, len(defs))
	for _, def := range defs {
		t, err := reuseOrNewTool(server, def, old)
		if err != nil {
			return nil, err
		}
		tools = append(tools, t)
	}
	return newSnapshot(tools), nil
}
