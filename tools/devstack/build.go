package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// versionVar is where every binary keeps its version; the services read no SVC_VERSION.
const versionVar = "svc.dev/libs/buildinfo.version"

// buildVersion names what is being run: the git description of the work tree, or "dev" when
// there is no git or no commit yet.
func buildVersion(ctx context.Context, root string) string {
	cmd := exec.CommandContext(ctx, "git", "describe", "--tags", "--always", "--dirty")
	cmd.Dir = root
	out, err := cmd.Output()
	v := strings.TrimSpace(string(out))
	if err != nil || v == "" {
		return "dev"
	}
	return v
}

// goBinary finds the go command. `go run` does not always put its own toolchain on PATH, so
// GOROOT is the fallback.
func goBinary(lookPath func(string) (string, error), env map[string]string) (string, error) {
	if p, err := lookPath("go"); err == nil {
		return p, nil
	}
	if root, ok := env["GOROOT"]; ok {
		if p := filepath.Join(root, "bin", "go"); isExecutable(p) {
			return p, nil
		}
	}
	return "", errors.New("the go command is not on PATH (and GOROOT/bin/go does not exist)")
}

// buildJob is one `go build` of one service.
type buildJob struct {
	name   string
	output string
	err    error
	took   time.Duration
}

// buildServices builds each service into binDir, parallel at a time: `go build` is already
// parallel inside, and two at once keeps a two-core machine busy without thrashing it. The
// compiler's output of a failed build goes to out, prefixed with the service's name.
func buildServices(ctx context.Context, goBin, root, binDir, version string, names []string, env []string, parallel int, out io.Writer) error {
	if err := os.MkdirAll(binDir, 0o755); err != nil {
		return err
	}
	jobs := make([]buildJob, len(names))
	sem := make(chan struct{}, max(parallel, 1))
	var wg sync.WaitGroup
	for i, name := range names {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			start := time.Now()
			cmd := exec.CommandContext(ctx, goBin, "build",
				"-ldflags", "-X "+versionVar+"="+version,
				"-o", filepath.Join(binDir, name),
				"./services/"+name+"/cmd/"+name)
			cmd.Dir = root
			cmd.Env = env
			b, err := cmd.CombinedOutput()
			jobs[i] = buildJob{name: name, output: string(b), err: err, took: time.Since(start)}
		})
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return err
	}
	var failed []string
	for _, j := range jobs {
		if j.err == nil {
			fmt.Fprintf(out, "built %s in %s\n", j.name, j.took.Round(100*time.Millisecond))
			continue
		}
		failed = append(failed, j.name)
		lw := newLineWriter("build "+j.name+" | ", out)
		_, _ = io.WriteString(lw, j.output)
		lw.Flush()
	}
	if len(failed) > 0 {
		return fmt.Errorf("go build failed for %s (compiler output above)", strings.Join(failed, ", "))
	}
	return nil
}

// checkBinaries is the -no-build counterpart of buildServices: it names what is missing.
func checkBinaries(binDir string, names []string) error {
	var missing []string
	for _, name := range names {
		if !isExecutable(filepath.Join(binDir, name)) {
			missing = append(missing, name)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("-no-build: no binary for %s in %s; run once without -no-build",
			strings.Join(missing, ", "), binDir)
	}
	return nil
}
