package check

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
)

// Root finds the repository root (the directory that holds go.work) from dir upwards.
func Root(dir string) (string, error) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.work")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.work above the working directory")
		}
		dir = parent
	}
}

// Services lists the services of the repository: every services/<name> with a
// cmd/<name>/main.go. The code is the list; the manifests are held to it.
func Services(root string) ([]string, error) {
	entries, err := os.ReadDir(filepath.Join(root, "services"))
	if err != nil {
		return nil, err
	}
	var names []string
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		if _, err := os.Stat(filepath.Join(root, "services", e.Name(), "cmd", e.Name(), "main.go")); err == nil {
			names = append(names, e.Name())
		}
	}
	if len(names) == 0 {
		return nil, fmt.Errorf("no services/<name>/cmd/<name>/main.go under %s", root)
	}
	sort.Strings(names)
	return names, nil
}
