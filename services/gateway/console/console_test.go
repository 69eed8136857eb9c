package console

import (
	"crypto/sha256"
	"encoding/hex"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// sourceHash is scripts/stamp.mjs's hash of the console's sources.
func sourceHash(t *testing.T) string {
	t.Helper()
	files := []string{"index.html", "package.json", "package-lock.json", "tsconfig.json", "vite.config.ts"}
	for _, dir := range []string{"src", "public"} {
		require.NoError(t, filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
			if err == nil && !d.IsDir() {
				files = append(files, filepath.ToSlash(p))
			}
			return err
		}))
	}
	sort.Strings(files)
	h := sha256.New()
	for _, f := range files {
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		h.Write([]byte(f + "\x00"))
		h.Write(b)
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil))
}

// TestDistIsFresh fails when the committed build is not the build of the committed sources.
func TestDistIsFresh(t *testing.T) {
	stamp, err := fs.ReadFile(dist, "dist/SOURCE_HASH")
	require.NoError(t, err)
	require.Equal(t, sourceHash(t), strings.TrimSpace(string(stamp)),
		"services/gateway/console/dist is stale: run `make console` and commit dist/")
}

func TestServe(t *testing.T) {
	h := New()
	entries, err := fs.ReadDir(h.files, "assets")
	require.NoError(t, err)
	var js, css string
	for _, e := range entries {
		switch filepath.Ext(e.Name()) {
		case ".js":
			js = "/assets/" + e.Name()
		case ".css":
			css = "/assets/" + e.Name()
		}
	}
	require.NotEmpty(t, js)
	require.NotEmpty(t, css)

	for _, tc := range []struct {
		method, path string
		owns         bool
	}{
		{"GET", "/", true}, {"HEAD", "/", true}, {"GET", "/runs", true}, {"GET", "/runs/run_1", true},
		{"GET", "/workflows/wf_1", true}, {"GET", "/signin", true}, {"GET", "/keys", true}, {"GET", "/organization", true}, {"GET", js, true},
		{"GET", "/docs", true}, {"HEAD", "/docs", true}, {"GET", "/ui", true}, {"HEAD", "/ui", true},
		{"GET", "/ui/", true}, {"GET", "/ui/runs/run_1", true}, {"POST", "/ui", false}, {"POST", "/docs", false},
		{"GET", "/uix", false}, {"GET", "/docsx", false}, {"GET", "/api/docs", false}, {"GET", "/api/ui", false},
		{"POST", "/", false}, {"GET", "/nope", false}, {"GET", "/ready", false}, {"GET", "/assets/nope.js", false},
		{"GET", "/assets/", false}, {"GET", "/api/runs", false}, {"GET", "/health", false}, {"DELETE", "/runs", false},
		{"GET", "/favicon.svg", true}, {"HEAD", "/favicon.svg", true}, {"POST", "/favicon.svg", false},
		{"GET", "/favicon.ico", false}, {"GET", "/SOURCE_HASH", false}, {"GET", "/index.html", false},
	} {
		require.Equal(t, tc.owns, h.Owns(tc.method, tc.path), "%s %s", tc.method, tc.path)
	}

	get := func(p string, hdr ...string) *httptest.ResponseRecorder {
		req := httptest.NewRequest(http.MethodGet, p, nil)
		for i := 0; i+1 < len(hdr); i += 2 {
			req.Header.Set(hdr[i], hdr[i+1])
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec
	}
	for _, p := range []string{"/", "/runs/run_1", "/docs"} {
		rec := get(p)
		require.Equal(t, http.StatusOK, rec.Code)
		require.Equal(t, "text/html; charset=utf-8", rec.Header().Get("Content-Type"))
		require.Equal(t, "no-cache", rec.Header().Get("Cache-Control"))
		require.Contains(t, rec.Body.String(), `<div id="app">`)
		require.Contains(t, rec.Body.String(), js)
		require.Equal(t, http.StatusNotModified, get(p, "If-None-Match", rec.Header().Get("ETag")).Code)
	}
	rec := get(js)
	require.Equal(t, http.StatusOK, rec.Code)
	require.Equal(t, "text/javascript; charset=utf-8", rec.Header().Get("Content-Type"))
	require.Contains(t, rec.Header().Get("Cache-Control"), "immutable")
	require.Equal(t, "text/css; charset=utf-8", get(css).Header().Get("Content-Type"))

	// The favicon the page links to: an SVG, cached for a day (its name carries no hash).
	require.Contains(t, string(h.index), `<link rel="icon" type="image/svg+xml" href="/favicon.svg"`)
	rec = get("/favicon.svg")
	require.Equal(t, http.StatusOK, rec.Code)
	require.Equal(t, "image/svg+xml", rec.Header().Get("Content-Type"))
	require.Equal(t, "public, max-age=86400", rec.Header().Get("Cache-Control"))
	require.Contains(t, rec.Body.String(), "<svg")
}

// TestNavigation: a browser loading a page at a path the console has no route for gets the
// console (a 404 with index.html, whose app shows the not-found page); API clients, and every
// path under /api, are left to the gateway's JSON answers.
func TestNavigation(t *testing.T) {
	t.Parallel()
	h := New()
	const browser = "text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,image/webp,*/*;q=0.8"
	for _, tc := range []struct {
		method, path, accept string
		page                 bool
	}{
		{"GET", "/nope", browser, true},
		{"HEAD", "/nope", browser, true},
		{"GET", "/ready", browser, true},
		{"GET", "/a/b/c", "text/html", true},
		{"GET", "/nope", "application/xhtml+xml", true},
		{"GET", "/nope", "TEXT/HTML; charset=utf-8", true},
		{"GET", "/nope", "application/json, text/html;q=0.5", true},
		{"GET", "/nope", "text/html;q=0", false},
		{"GET", "/nope", "", false},
		{"GET", "/nope", "*/*", false},
		{"GET", "/nope", "application/json", false},
		{"GET", "/nope", "text/*", false},
		{"POST", "/nope", browser, false},
		{"DELETE", "/nope", browser, false},
		{"GET", "/api", browser, false},
		{"GET", "/api/nope", browser, false},
		{"GET", "/api/runs/run_1", browser, false},
		{"GET", "/API/runs", browser, false},
		{"GET", "/apis", browser, true},
	} {
		req := httptest.NewRequest(tc.method, tc.path, nil)
		if tc.accept != "" {
			req.Header.Set("Accept", tc.accept)
		}
		require.Equal(t, tc.page, h.Navigation(req, tc.path), "%s %s Accept %q", tc.method, tc.path, tc.accept)
	}

	for _, method := range []string{http.MethodGet, http.MethodHead} {
		req := httptest.NewRequest(method, "/nope", nil)
		req.Header.Set("Accept", browser)
		req.Header.Set("If-None-Match", h.etag)
		rec := httptest.NewRecorder()
		h.ServeNotFound(rec, req)
		require.Equal(t, http.StatusNotFound, rec.Code, method)
		require.Equal(t, "text/html; charset=utf-8", rec.Header().Get("Content-Type"))
		require.Equal(t, "no-cache", rec.Header().Get("Cache-Control"))
		require.Empty(t, rec.Header().Get("ETag"), "a 404 is not revalidated into a 304")
		if method == http.MethodGet {
			require.Contains(t, rec.Body.String(), `<div id="app">`)
		} else {
			require.Empty(t, rec.Body.String())
		}
	}
}

// TestLegacyRedirect checks that /ui and the paths under it are sent to the console at "/"
// for good, with no page of their own.
func TestLegacyRedirect(t *testing.T) {
	t.Parallel()
	h := New()
	for _, method := range []string{http.MethodGet, http.MethodHead} {
		for _, p := range []string{"/ui", "/ui/", "/ui/runs/run_1"} {
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(method, p+"?x=1", nil))
			require.Equal(t, http.StatusMovedPermanently, rec.Code, "%s %s", method, p)
			require.Equal(t, "/", rec.Header().Get("Location"), "%s %s", method, p)
			require.Empty(t, rec.Body.String(), "%s %s", method, p)
		}
	}
}
