// Package workspace finds the repository the tools run in: the directory that holds go.work.
package workspace

import (
	"errors"
	"os"
	"path/filepath"
)

// ErrNotFound says no directory from the start upwards holds go.work.
var ErrNotFound = errors.New("no go.work here or above") //nolint:gochecknoglobals // sentinel

// Root walks up from dir to the directory that holds go.work, so a tool works from any folder
// of the repository.
func Root(dir string) (string, error) {
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.work")); err == nil {
			return d, nil
		}
		if d == filepath.Dir(d) {
			return "", ErrNotFound
		}
	}
}
