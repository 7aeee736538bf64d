package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

// npmDirs are the JS test folders installed by this test binary, each once.
var npmDirs sync.Map // dir → *npmDir

type npmDir struct {
	once sync.Once
	err  error
}

// requireNPM installs e2e/DIR from its lock (npm ci) unless the package at
// node_modules/PROBE is there already; once per test binary. A machine
// without node and npm fails the test: the checks against clients and
// servers of another language are part of the suite.
func requireNPM(t *testing.T, dir, probe string) {
	t.Helper()
	v, _ := npmDirs.LoadOrStore(dir, &npmDir{})
	d := v.(*npmDir)
	d.once.Do(func() {
		if _, err := exec.LookPath("node"); err != nil {
			d.err = fmt.Errorf("node is not on PATH: e2e/%s runs with Node.js 20 or later", dir)
			return
		}
		if _, err := os.Stat(filepath.Join(dir, "node_modules", probe, "package.json")); err == nil {
			return
		}
		npm, err := exec.LookPath("npm")
		if err != nil {
			d.err = fmt.Errorf("npm is not on PATH to install e2e/%s (npm ci)", dir)
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), jsInstallLimit)
		defer cancel()
		cmd := exec.CommandContext(ctx, npm, "ci", "--ignore-scripts", "--no-audit", "--no-fund")
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			d.err = fmt.Errorf("npm ci in e2e/%s: %v\n%s", dir, err, out)
		}
	})
	if d.err != nil {
		t.Fatal(d.err)
	}
}
