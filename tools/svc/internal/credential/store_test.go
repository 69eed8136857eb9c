package credential_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"svc.dev/tools/svc/internal/credential"
)

func session(n int) credential.Session {
	return credential.Session{
		UserID: fmt.Sprintf("usr_%d", n), UserEmail: fmt.Sprintf("u%d@example.com", n), OrganizationID: fmt.Sprintf("org_%d", n),
		OrganizationSlug: fmt.Sprintf("personal-%08d", n), APIKey: fmt.Sprintf("svc_key%d", n), APIKeyID: fmt.Sprintf("key_%d", n),
		SessionCookie: fmt.Sprintf("svc.session_token=tok%d.sig", n), CreatedAt: "2026-11-22T06:00:00.000Z",
	}
}

func TestStore(t *testing.T) {
	t.Parallel()

	type testBundle struct {
		path  string
		store *credential.Store
	}

	setup := func(t *testing.T) *testBundle {
		t.Helper()
		// A directory that does not exist yet: the store creates it.
		path := filepath.Join(t.TempDir(), "nested", ".svc", "credentials.json")
		return &testBundle{path: path, store: credential.NewStore(path)}
	}

	readRaw := func(t *testing.T, path string) map[string]any {
		t.Helper()
		b, err := os.ReadFile(path)
		require.NoError(t, err)
		var m map[string]any
		require.NoError(t, json.Unmarshal(b, &m))
		return m
	}

	t.Run("MissingFileIsEmpty", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		f, err := b.store.Load()
		require.NoError(t, err)
		require.Empty(t, f.Default)
		require.Empty(t, f.Sessions)
		_, ok, err := b.store.Get("http://a")
		require.NoError(t, err)
		require.False(t, ok)
		_, err = os.Stat(b.path)
		require.True(t, errors.Is(err, os.ErrNotExist), "reading never creates the file")
	})

	t.Run("ShapeAndMode", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		require.NoError(t, b.store.Put("http://a:8080", session(1)))

		info, err := os.Stat(b.path)
		require.NoError(t, err)
		require.Equal(t, os.FileMode(0o600), info.Mode().Perm())
		dir, err := os.Stat(filepath.Dir(b.path))
		require.NoError(t, err)
		require.Equal(t, os.FileMode(0o700), dir.Mode().Perm())

		raw := readRaw(t, b.path)
		require.Equal(t, map[string]any{
			"default": "http://a:8080",
			"sessions": map[string]any{"http://a:8080": map[string]any{
				"userId": "usr_1", "userEmail": "u1@example.com", "organizationId": "org_1", "organizationSlug": "personal-00000001",
				"apiKey": "svc_key1", "apiKeyId": "key_1", "sessionCookie": "svc.session_token=tok1.sig", "createdAt": "2026-11-22T06:00:00.000Z",
			}},
		}, raw)
	})

	t.Run("AWiderModeIsReplacedBy0600", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		require.NoError(t, os.MkdirAll(filepath.Dir(b.path), 0o700))
		require.NoError(t, os.WriteFile(b.path, []byte(`{"default":"","sessions":{}}`), 0o644))
		require.NoError(t, os.Chmod(b.path, 0o644))
		require.NoError(t, b.store.Put("http://a", session(1)))
		info, err := os.Stat(b.path)
		require.NoError(t, err)
		require.Equal(t, os.FileMode(0o600), info.Mode().Perm())
	})

	t.Run("SeveralAPIsSideBySide", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		require.NoError(t, b.store.Put("http://a", session(1)))
		require.NoError(t, b.store.Put("https://b.example.com", session(2)))

		f, err := b.store.Load()
		require.NoError(t, err)
		require.Equal(t, "https://b.example.com", f.Default, "the last login is the default")
		require.Equal(t, []string{"http://a", "https://b.example.com"}, f.APIs())
		require.Equal(t, session(1), f.Sessions["http://a"])
		require.Equal(t, session(2), f.Sessions["https://b.example.com"])

		// A new login to an API replaces only its entry.
		require.NoError(t, b.store.Put("http://a", session(3)))
		f, err = b.store.Load()
		require.NoError(t, err)
		require.Equal(t, "http://a", f.Default)
		require.Equal(t, session(3), f.Sessions["http://a"])
		require.Equal(t, session(2), f.Sessions["https://b.example.com"])
	})

	t.Run("RemoveTouchesOnlyThatAPI", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		for i, api := range []string{"http://a", "http://b", "http://c"} {
			require.NoError(t, b.store.Put(api, session(i)))
		}

		removed, err := b.store.Remove("http://b")
		require.NoError(t, err)
		require.True(t, removed)
		f, err := b.store.Load()
		require.NoError(t, err)
		require.Equal(t, map[string]credential.Session{"http://a": session(0), "http://c": session(2)}, f.Sessions)
		require.Equal(t, "http://c", f.Default, "the default stays when another API is removed")

		// Removing the default moves it to the first remaining API.
		removed, err = b.store.Remove("http://c")
		require.NoError(t, err)
		require.True(t, removed)
		f, err = b.store.Load()
		require.NoError(t, err)
		require.Equal(t, "http://a", f.Default)
		require.Equal(t, map[string]credential.Session{"http://a": session(0)}, f.Sessions)

		removed, err = b.store.Remove("http://nowhere")
		require.NoError(t, err)
		require.False(t, removed)

		removed, err = b.store.Remove("http://a")
		require.NoError(t, err)
		require.True(t, removed)
		require.Equal(t, map[string]any{"default": "", "sessions": map[string]any{}}, readRaw(t, b.path))
	})

	t.Run("WritesAreAtomicAndSerialized", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		require.NoError(t, b.store.Put("http://seed", session(0)))

		// Writers from two stores on the same path (as two processes would be) while a reader
		// keeps reading: the reader always sees a whole file, and no writer loses another's entry.
		const writers, perWriter = 8, 10
		stop := make(chan struct{})
		readerDone := make(chan error, 1)
		go func() {
			for {
				select {
				case <-stop:
					readerDone <- nil
					return
				default:
				}
				raw, err := os.ReadFile(b.path)
				if err != nil {
					readerDone <- err
					return
				}
				var f credential.File
				if err := json.Unmarshal(raw, &f); err != nil {
					readerDone <- fmt.Errorf("a reader saw a partial file: %w: %q", err, raw)
					return
				}
			}
		}()
		var wg sync.WaitGroup
		errs := make(chan error, writers*perWriter)
		for w := range writers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				s := credential.NewStore(b.path)
				for i := range perWriter {
					errs <- s.Put(fmt.Sprintf("http://w%d-%d", w, i), session(w*100+i))
				}
			}()
		}
		wg.Wait()
		close(stop)
		require.NoError(t, <-readerDone)
		close(errs)
		for err := range errs {
			require.NoError(t, err)
		}

		f, err := b.store.Load()
		require.NoError(t, err)
		require.Len(t, f.Sessions, writers*perWriter+1)
		entries, err := os.ReadDir(filepath.Dir(b.path))
		require.NoError(t, err)
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		require.ElementsMatch(t, []string{"credentials.json", "credentials.json.lock"}, names, "no temporary file is left behind")
	})

	t.Run("InvalidJSONIsAnErrorNamingTheFile", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		require.NoError(t, os.MkdirAll(filepath.Dir(b.path), 0o700))
		require.NoError(t, os.WriteFile(b.path, []byte("{not json"), 0o600))
		_, err := b.store.Load()
		require.ErrorContains(t, err, b.path)
		require.Error(t, b.store.Put("http://a", session(1)), "a broken file is not silently overwritten")
		raw, err := os.ReadFile(b.path)
		require.NoError(t, err)
		require.Equal(t, "{not json", string(raw))
	})
}

func TestDefaultPath(t *testing.T) {
	t.Parallel()
	home := func() (string, error) { return "/home/ana", nil }
	noHome := func() (string, error) { return "", errors.New("$HOME is not defined") }
	env := func(kv map[string]string) func(string) string { return func(k string) string { return kv[k] } }

	p, err := credential.DefaultPath(env(nil), home)
	require.NoError(t, err)
	require.Equal(t, "/home/ana/.svc/credentials.json", p)

	p, err = credential.DefaultPath(env(map[string]string{"SVC_CREDENTIALS": "/tmp/c.json"}), noHome)
	require.NoError(t, err)
	require.Equal(t, "/tmp/c.json", p, "SVC_CREDENTIALS wins and needs no home")

	_, err = credential.DefaultPath(env(nil), noHome)
	require.ErrorContains(t, err, "SVC_CREDENTIALS")
}
