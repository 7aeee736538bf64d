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
