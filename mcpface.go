package handoff

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/handoff-a2a/handoff/internal/a2ahttp"
	"github.com/handoff-a2a/handoff/mcp"
)

// MCPFaceConfig serves the agent over MCP (streamable HTTP) beside A2A:
// each skill is a tool, and each call an A2A task of its caller.
type MCPFaceConfig struct {
	// Enabled turns the MCP face on. Default off.
	Enabled bool `yaml:"enabled"`
	// Path is where the face answers. Default /mcp.
	Path string `yaml:"path"`
}

// defaultMCPPath is where the MCP face answers unless the config says.
const defaultMCPPath = "/mcp"

// validate checks the mcp_server section and fills in its default path.
func (c *MCPFaceConfig) validate() error {
	if !c.Enabled {
		return nil
	}
	if c.Path == "" {
		c.Path = defaultMCPPath
	}
	if !strings.HasPrefix(c.Path, "/") || strings.ContainsAny(c.Path, " {}") || c.Path == "/" {
		return fmt.Errorf("%q is not an absolute path such as %s", c.Path, defaultMCPPath)
	}
	for _, taken := range []string{pathJSONRPC, pathREST, pathJWKS, "/.well-known/", "/healthz", "/readyz", "/a2a/"} {
		if c.Path == taken || strings.HasPrefix(c.Path, taken) {
			return fmt.Errorf("%q is under one of the agent's own routes (%s)", c.Path, taken)
		}
	}
	return nil
}

// routeMCP mounts the MCP face when the config enables it. Requests are
// authenticated like A2A ones, on their headers, and their bodies read
// within the same limits (size, read deadline, the in-flight budget) before
// the MCP SDK sees them; each tool call is then bound to the caller of its
// own HTTP request, so a session id carries no identity (see
// [a2ahttp.Face.MCP]).
func (a *Agent) routeMCP(mux *http.ServeMux, face *a2ahttp.Face) {
	if !a.cfg.MCPServer.Enabled {
		return
	}
	var tools []mcp.FaceTool
	for _, s := range a.cfg.Skills {
		tools = append(tools, mcp.FaceTool{
			Name: s.ID, Title: s.Name, Description: s.Description,
			MessageMetadata: map[string]any{SkillMetadataKey: s.ID},
		})
	}
	opts := []mcp.FaceOption{mcp.WithLogger(a.log)}
	if u, err := url.Parse(a.cfg.PublicURL); err == nil && u.Hostname() != "" {
		opts = append(opts, mcp.WithPublicHosts(u.Hostname())) // behind a proxy on this machine
	}
	mux.Handle(a.cfg.MCPServer.Path, face.MCP(mcp.NewFace(a.cfg.Name, a.cfg.Version, tools, a.handler, face.Caller, opts...)))
}
