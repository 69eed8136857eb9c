// Package credential keeps the svc CLI's credentials file (README.md, Credentials file):
// ~/.svc/credentials.json unless SVC_CREDENTIALS names another path, mode 0600, holding one
// session per API URL side by side and the URL last logged in to as the default. Every write
// replaces the file atomically (temporary file in the same directory, fsync, rename), under
// an advisory lock so that two svc processes never lose each other's entries.
package credential

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
)

// EnvPath is the environment variable that overrides the file's path.
const EnvPath = "SVC_CREDENTIALS"

// fileMode is the mode the credentials file must have; dirMode keeps ~/.svc private too.
const (
	fileMode fs.FileMode = 0o600
	dirMode  fs.FileMode = 0o700
)

// Session is what a login leaves for one API (the file's field names).
type Session struct {
	UserID           string `json:"userId"`
	UserEmail        string `json:"userEmail"`
	OrganizationID   string `json:"organizationId"`
	OrganizationSlug string `json:"organizationSlug"`
	APIKey           string `json:"apiKey"`
	APIKeyID         string `json:"apiKeyId"`
	// SessionCookie is kept because key administration needs a session (a key cannot
	// create, list or revoke keys).
	SessionCookie string `json:"sessionCookie"`
	// CreatedAt is when the login happened, ISO 8601.
	CreatedAt string `json:"createdAt"`
}

// File is the whole credentials file.
type File struct {
	// Default is the API URL of the last login ("" when there is none).
	Default string `json:"default"`
	// Sessions are keyed by normalized API URL.
	Sessions map[string]Session `json:"sessions"`
}

// APIs lists the URLs that have a session, sorted.
func (f *File) APIs() []string {
	out := make([]string, 0, len(f.Sessions))
	for k := range f.Sessions {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// Store reads and writes the file at one path.
type Store struct {
	path string
}

// NewStore returns the store of the file at path.
func NewStore(path string) *Store {
	if path == "" {
		panic("empty credentials path")
	}
	return &Store{path: path}
}

// Path is the file's path.
func (s *Store) Path() string { return s.path }

// DefaultPath is SVC_CREDENTIALS if set, else ~/.svc/credentials.json.
func DefaultPath(getenv func(string) string, homeDir func() (string, error)) (string, error) {
	if p := getenv(EnvPath); p != "" {
		return p, nil
	}
	home, err := homeDir()
	if err != nil {
		return "", fmt.Errorf("credentials path: no home directory (set %s): %w", EnvPath, err)
	}
	return filepath.Join(home, ".svc", "credentials.json"), nil
}

// Load reads the file; a missing file is an empty one.
func (s *Store) Load() (*File, error) {
	b, err := os.ReadFile(s.path)
	if errors.Is(err, fs.ErrNotExist) {
		return &File{Sessions: map[string]Session{}}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read credentials: %w", err)
	}
	var f File
	if err := json.Unmarshal(b, &f); err != nil {
		return nil, fmt.Errorf("read credentials %s: not valid JSON (remove it and log in again): %w", s.path, err)
	}
	if f.Sessions == nil {
		f.Sessions = map[string]Session{}
	}
	return &f, nil
}

// Get returns the session for api, if there is one.
func (s *Store) Get(api string) (Session, bool, error) {
	f, err := s.Load()
	if err != nil {
		return Session{}, false, err
	}
	sess, ok := f.Sessions[api]
	return sess, ok, nil
}

// Put stores the session for api and makes api the default.
func (s *Store) Put(api string, sess Session) error {
	return s.update(func(f *File) {
		f.Sessions[api] = sess
		f.Default = api
	})
}

// Remove deletes api's session and leaves the others. When api was the default, the default
// moves to the first remaining API (sorted), or to "" when none is left. It reports whether
// there was a session to remove.
func (s *Store) Remove(api string) (bool, error) {
	removed := false
	err := s.update(func(f *File) {
		_, removed = f.Sessions[api]
		delete(f.Sessions, api)
		if f.Default == api {
			f.Default = ""
			if rest := f.APIs(); len(rest) > 0 {
				f.Default = rest[0]
			}
		}
	})
	return removed, err
}

// update is a locked read-modify-write.
func (s *Store) update(change func(f *File)) error {
	dir := filepath.Dir(s.path)
	if err := os.MkdirAll(dir, dirMode); err != nil {
		return fmt.Errorf("write credentials: %w", err)
	}
	unlock, err := lock(s.path + ".lock")
	if err != nil {
		return fmt.Errorf("write credentials: lock: %w", err)
	}
	defer unlock()
	f, err := s.Load()
	if err != nil {
		return err
	}
	change(f)
	return s.write(f)
}

// write replaces the file atomically: a reader sees the old file or the new one, never a
// part, and the file is never readable by others, not even for a moment.
func (s *Store) write(f *File) (err error) {
	b, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return fmt.Errorf("write credentials: %w", err)
	}
	b = append(b, '\n')
	dir := filepath.Dir(s.path)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(s.path)+".*.tmp")
	if err != nil {
		return fmt.Errorf("write credentials: %w", err)
	}
	defer func() {
		if err != nil {
			_ = tmp.Close()
			_ = os.Remove(tmp.Name())
		}
	}()
	// CreateTemp makes the file 0600 already; Chmod states it and survives an odd umask.
	if err = tmp.Chmod(fileMode); err != nil {
		return fmt.Errorf("write credentials: %w", err)
	}
	if _, err = tmp.Write(b); err != nil {
		return fmt.Errorf("write credentials: %w", err)
	}
	if err = tmp.Sync(); err != nil {
		return fmt.Errorf("write credentials: %w", err)
	}
	if err = tmp.Close(); err != nil {
		return fmt.Errorf("write credentials: %w", err)
	}
	if err = os.Rename(tmp.Name(), s.path); err != nil {
		return fmt.Errorf("write credentials: %w", err)
	}
	// The rename is durable once the directory is synced.
	if d, derr := os.Open(dir); derr == nil {
		_ = d.Sync()
		_ = d.Close()
	}
	return nil
}
