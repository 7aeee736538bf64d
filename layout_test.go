package handoff

import (
	"os/exec"
	"strings"
	"testing"
)

// listPackages runs go list over the module: import path, doc synopsis and
// imports of every package.
func listPackages(t *testing.T) map[string][2]string {
	t.Helper()
	out, err := exec.Command("go", "list", "-e", "-f", "{{.ImportPath}}\t{{.Doc}}\t{{join .Imports \" \"}}", "./...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	pkgs := map[string][2]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.SplitN(line, "\t", 3)
		if len(f) == 3 {
			pkgs[f[0]] = [2]string{f[1], f[2]}
		}
	}
	return pkgs
}

// TestPackagesHaveDocs: every package says what it is for.
func TestPackagesHaveDocs(t *testing.T) {
	for path, p := range listPackages(t) {
		if p[0] == "" {
			t.Errorf("package %s has no package doc comment", path)
		}
	}
}

// TestImportsGoDownward keeps DESIGN.md's layering: the stores and the card
// never reach up into what uses them.
func TestImportsGoDownward(t *testing.T) {
	const mod = "github.com/handoff-a2a/handoff"
	forbidden := map[string][]string{
		mod + "/tasks":      {mod, mod + "/push", mod + "/mcp", mod + "/delegation", mod + "/acceptance", mod + "/agentcard", mod + "/cmd/handoff"},
		mod + "/agentcard":  {mod, mod + "/push", mod + "/mcp", mod + "/delegation", mod + "/acceptance", mod + "/tasks", mod + "/cmd/handoff"},
		mod + "/artifacts":  {mod, mod + "/push", mod + "/mcp", mod + "/delegation", mod + "/acceptance", mod + "/cmd/handoff"},
		mod + "/push":       {mod, mod + "/mcp", mod + "/delegation", mod + "/acceptance", mod + "/cmd/handoff"},
		mod + "/mcp":        {mod, mod + "/push", mod + "/delegation", mod + "/acceptance", mod + "/cmd/handoff"},
		mod + "/acceptance": {mod, mod + "/push", mod + "/delegation", mod + "/cmd/handoff"},
		mod + "/delegation": {mod, mod + "/push", mod + "/cmd/handoff"},
	}
	pkgs := listPackages(t)
	for pkg, bad := range forbidden {
		p, ok := pkgs[pkg]
		if !ok {
			continue // not built yet
		}
		imports := " " + p[1] + " "
		for _, b := range bad {
			if strings.Contains(imports, " "+b+" ") {
				t.Errorf("%s imports %s: packages import downward only (DESIGN.md)", pkg, b)
			}
		}
	}
}

// TestVerifierImportsNoStore: a webhook owner imports push/webhook alone, so
// nothing it pulls in may reach the engine or a store library (DESIGN.md).
func TestVerifierImportsNoStore(t *testing.T) {
	const pkg = "github.com/handoff-a2a/handoff/push/webhook"
	out, err := exec.Command("go", "list", "-deps", pkg).Output()
	if err != nil {
		t.Fatalf("go list -deps %s: %v", pkg, err)
	}
	for _, dep := range strings.Fields(string(out)) {
		for _, bad := range []string{"go.etcd.io/bbolt", "github.com/redis/go-redis", "github.com/handoff-a2a/handoff/tasks"} {
			if dep == bad || strings.HasPrefix(dep, bad+"/") {
				t.Errorf("%s depends on %s: a webhook owner must not pull in the engine or a store", pkg, dep)
			}
		}
	}
}
