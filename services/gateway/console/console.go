// Package console serves the web console (ARCHITECTURE §9): the static build of the front-end
// project beside this file (Vite + TypeScript + Preact), committed in dist/ and embedded here,
// so the gateway binary serves it with no node at run time. `make console` rebuilds dist/;
// TestDistIsFresh fails when dist/ was not rebuilt after a source change.
package console

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"strconv"
	"strings"
	"time"
)

//go:embed dist
var dist embed.FS

// clientRoute reports whether first is the first segment of one of the console's own pages;
// with "/" they are the paths answered with index.html (the app routes them in the browser).
// Every other path is not the console's and stays the gateway's (guarded, 401/404 as the
// contract says). docs is the API reference, rendered in the browser from /api/openapi.json.
func clientRoute(first string) bool {
	switch first {
	case "signin", "signup", "workflows", "runs", "schedules", "keys", "docs":
		return true
	}
	return false
}

// legacyPrefix is the first segment of a path people try for a web UI (issue 15): the console
// owns it and sends it to "/" for good, where it would otherwise get the 401 (or, with
// credentials, the 404) of a guarded unknown path.
const legacyPrefix = "ui"

// Handler serves the console.
type Handler struct {
	files fs.FS
	index []byte
	etag  string
}

// New returns the handler over the embedded build.
func New() *Handler {
	sub, err := fs.Sub(dist, "dist")
	if err != nil {
		panic(err)
	}
	index, err := fs.ReadFile(sub, "index.html")
	if err != nil {
		panic("console: dist/index.html is missing; run `make console`")
	}
	sum := sha256.Sum256(index)
	return &Handler{files: sub, index: index, etag: `"` + hex.EncodeToString(sum[:12]) + `"`}
}

// Owns reports whether a GET or HEAD of the clean path p is the console's: "/", a client
// route, a file of the build's assets directory, or /ui and the paths under it (redirected).
func (h *Handler) Owns(method, p string) bool {
	if method != http.MethodGet && method != http.MethodHead {
		return false
	}
	if p == "/" {
		return true
	}
	first, rest, _ := strings.Cut(strings.TrimPrefix(p, "/"), "/")
	if first == "assets" {
		return rest != "" && !strings.Contains(rest, "/") && fileExists(h.files, "assets/"+rest)
	}
	return first == legacyPrefix || clientRoute(first)
}

func fileExists(fsys fs.FS, name string) bool {
	st, err := fs.Stat(fsys, name)
	return err == nil && !st.IsDir()
}

// ServeHTTP answers a path Owns accepted: /ui… a permanent redirect to "/", an asset
// (content-hashed names, cached for a year) or index.html (revalidated on every load so a new
// build is picked up).
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	hd := w.Header()
	hd.Set("X-Content-Type-Options", "nosniff")
	if first, _, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/"); first == legacyPrefix {
		// A redirect and not a second name for the console: a bookmark or a guess ends on
		// the one address. Owns admits only GET and HEAD, for which 301 and 308 mean the same.
		hd.Set("Location", "/")
		w.WriteHeader(http.StatusMovedPermanently)
		return
	}
	if name, ok := strings.CutPrefix(r.URL.Path, "/assets/"); ok {
		b, err := fs.ReadFile(h.files, "assets/"+name)
		if err != nil {
			http.NotFound(w, r)
			return
		}
		ct := mime.TypeByExtension(path.Ext(name))
		if ct == "" {
			ct = "application/octet-stream"
		}
		hd.Set("Content-Type", ct)
		hd.Set("Cache-Control", "public, max-age=31536000, immutable")
		http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(b))
		return
	}
	hd.Set("Cache-Control", "no-cache")
	hd.Set("ETag", h.etag)
	hd.Set("Content-Type", "text/html; charset=utf-8")
	hd.Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; style-src 'self'; frame-ancestors 'none'")
	hd.Set("X-Frame-Options", "DENY")
	if inm := r.Header.Get("If-None-Match"); inm == h.etag || inm == "W/"+h.etag {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	hd.Set("Content-Length", strconv.Itoa(len(h.index)))
	w.WriteHeader(http.StatusOK)
	if r.Method == http.MethodGet {
		_, _ = w.Write(h.index)
	}
}
