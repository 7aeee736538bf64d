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
		mod + "/tasks":      {mod, mod + "/push", mod + "/mcp", mod + "/delegation", mod + "/acceptance", mod + "/agentcard", mod + "/cmd/handoff", mod + "/internal/a2ahttp"},
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

// depsOf lists, for each package pattern matches, every package it depends
// on, directly or not (go list's Deps).
func depsOf(t *testing.T, pattern string) map[string][]string {
	t.Helper()
	out, err := exec.Command("go", "list", "-e", "-f", "{{.ImportPath}}\t{{join .Deps \" \"}}", pattern).Output()
	if err != nil {
		t.Fatalf("go list %s: %v", pattern, err)
	}
	deps := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if path, d, ok := strings.Cut(line, "\t"); ok {
			deps[path] = strings.Fields(d)
		}
	}
	return deps
}

// within reports whether pkg is path or one of its subpackages.
func within(pkg, path string) bool { return pkg == path || strings.HasPrefix(pkg, path+"/") }

// TestEngineImportsNoStore: the engine (tasks) declares the store interfaces
// it consumes and depends on no store, directly or not: no package under
// tasks/ (the stores and what they share), no bbolt, no go-redis (DESIGN.md).
func TestEngineImportsNoStore(t *testing.T) {
	const engine = "github.com/handoff-a2a/handoff/tasks"
	deps, ok := depsOf(t, engine)[engine]
	if !ok {
		t.Fatalf("go list found no package %s", engine)
	}
	for _, dep := range deps {
		if strings.HasPrefix(dep, engine+"/") || within(dep, "go.etcd.io/bbolt") || within(dep, "github.com/redis/go-redis") {
			t.Errorf("the engine depends on %s: it imports no store and no store library", dep)
		}
	}
}

// TestStoresImportNothingAbove: a store (every package under tasks/) depends
// on the engine and on libraries, never on what uses the engine: not the
// root package, push, mcp, delegation, acceptance, the CLI or the
// transports and executors in internal/ (DESIGN.md).
func TestStoresImportNothingAbove(t *testing.T) {
	const mod = "github.com/handoff-a2a/handoff"
	above := []string{mod + "/push", mod + "/mcp", mod + "/delegation", mod + "/acceptance", mod + "/agentcard",
		mod + "/cmd", mod + "/examples", mod + "/e2e", mod + "/internal/skill", mod + "/internal/a2ahttp",
		mod + "/internal/a2aconnect", mod + "/internal/rest03", mod + "/internal/tck", mod + "/internal/bench"}
	stores := depsOf(t, "./tasks/...")
	delete(stores, mod+"/tasks")
	if len(stores) == 0 {
		t.Fatal("go list found no package under tasks/")
	}
	for pkg, deps := range stores {
		for _, dep := range deps {
			bad := dep == mod
			for _, a := range above {
				bad = bad || within(dep, a)
			}
			if bad {
				t.Errorf("%s depends on %s: a store imports nothing above the engine", pkg, dep)
			}
		}
	}
}

// TestFaceAndLoopImportDownward: the A2A HTTP face (internal/a2ahttp) serves
// the engine and knows nothing of what runs tasks, stores them or calls out;
// the executors (internal/skill) reach tools, peers and the gate, never the
// face, the transports or a store library; the model loop (internal/model)
// declares what it calls and depends on none of the packages that
// implement it (DESIGN.md).
func TestFaceAndLoopImportDownward(t *testing.T) {
	const mod = "github.com/handoff-a2a/handoff"
	common := []string{mod + "/cmd", mod + "/examples", mod + "/e2e", mod + "/internal/skill", mod + "/push",
		mod + "/mcp", mod + "/delegation", mod + "/acceptance", mod + "/tasks/boltstore", mod + "/tasks/redisstore",
		"go.etcd.io/bbolt", "github.com/redis/go-redis"}
	rules := map[string][]string{
		mod + "/internal/a2ahttp": append([]string{mod + "/agentcard", mod + "/artifacts", mod + "/internal/tck",
			mod + "/internal/bench", mod + "/internal/a2aconnect", mod + "/internal/model"}, common...),
		mod + "/internal/skill": {mod + "/push", mod + "/cmd", mod + "/examples", mod + "/e2e", mod + "/internal/a2ahttp",
			mod + "/internal/a2aconnect", mod + "/internal/rest03", mod + "/internal/bench", mod + "/tasks/boltstore",
			mod + "/tasks/redisstore"}, // bbolt and go-redis still come in through mcp's audit and acceptance's ledger stores
		mod + "/internal/console": {mod + "/push", mod + "/mcp", mod + "/delegation", mod + "/acceptance", mod + "/cmd",
			mod + "/examples", mod + "/e2e", mod + "/internal/skill", mod + "/tasks/boltstore", mod + "/tasks/redisstore",
			"go.etcd.io/bbolt", "github.com/redis/go-redis"},
		mod + "/internal/metrics": append([]string{mod + "/tasks", mod + "/internal/a2ahttp"}, common...),
		mod + "/internal/tracing": append([]string{mod + "/tasks", mod + "/internal/a2ahttp"}, common...),
		mod + "/mcp/policy":       append([]string{mod + "/tasks", mod + "/internal/a2ahttp", mod + "/agentcard"}, common...),
		mod + "/internal/model":   append([]string{mod + "/tasks", mod + "/internal/a2ahttp", mod + "/agentcard"}, common...),
	}
	for pkg, bad := range rules {
		deps, ok := depsOf(t, pkg)[pkg]
		if !ok {
			t.Fatalf("go list found no package %s", pkg)
		}
		for _, dep := range deps {
			if dep == mod || within(dep, mod+"/cmd") {
				t.Errorf("%s depends on %s", pkg, dep)
			}
			for _, b := range bad {
				if within(dep, b) {
					t.Errorf("%s depends on %s: it imports downward only (DESIGN.md)", pkg, dep)
				}
			}
		}
	}
}

// TestRootHoldsNoHTTPDecoding: the root package composes; decoding A2A
// requests and encoding their answers is the HTTP face's job, so the root
// imports none of the codecs the face uses.
func TestRootHoldsNoHTTPDecoding(t *testing.T) {
	const mod = "github.com/handoff-a2a/handoff"
	p, ok := listPackages(t)[mod]
	if !ok {
		t.Fatal("go list found no root package")
	}
	for _, imp := range strings.Fields(p[1]) {
		for _, b := range []string{mod + "/internal/rest03", mod + "/internal/a2ajson", "github.com/a2aproject/a2a-go/v2/log"} {
			if imp == b {
				t.Errorf("the root package imports %s: HTTP decoding belongs to internal/a2ahttp", imp)
			}
		}
	}
}

// TestOnlyRootRunsExecutors: the built-in executors are composed by the root
// package alone; nothing below it reaches up into internal/skill.
func TestOnlyRootRunsExecutors(t *testing.T) {
	const mod = "github.com/handoff-a2a/handoff"
	for path, p := range listPackages(t) {
		if path == mod || within(path, mod+"/internal/skill") || within(path, mod+"/cmd") || within(path, mod+"/examples") || within(path, mod+"/e2e") {
			continue
		}
		if strings.Contains(" "+p[1]+" ", " "+mod+"/internal/skill ") {
			t.Errorf("%s imports internal/skill: only the root package composes the executors", path)
		}
	}
}
