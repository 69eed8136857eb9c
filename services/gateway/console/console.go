// Package console serves the web console (docs/CONSOLE.md): the static build of the front-end
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
// Every other path is not the console's and stays the gateway's (guarded, 401/404 as
// docs/API.md says), except for a browser's navigation to it (Navigation). docs is the API
// reference, rendered in the browser from /api/openapi.json.
func clientRoute(first string) bool {
	switch first {
	case "signin", "signup", "workflows", "runs", "schedules", "keys", "organization", "docs":
		return true
	}
	return false
}

// rootFile reports whether name is a file of the build served at the root under its own
// name (Vite copies public/ there): not content-hashed, so cached for a day only.
func rootFile(name string) bool { return name == "favicon.svg" }

// legacyPrefix is the first segment of a path people try for a web UI: the console
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
// route, a file of the build's assets directory, the favicon, or /ui and the paths under it
// (redirected).
func (h *Handler) Owns(method, p string) bool {
	if method != http.MethodGet && method != http.MethodHead {
		return false
	}
	if p == "/" {
		return true
	}
	if name := strings.TrimPrefix(p, "/"); rootFile(name) {
		return fileExists(h.files, name)
	}
	first, rest, _ := strings.Cut(strings.TrimPrefix(p, "/"), "/")
	if first == "assets" {
		return rest != "" && !strings.Contains(rest, "/") && fileExists(h.files, "assets/"+rest)
	}
	return first == legacyPrefix || clientRoute(first)
}

// Navigation reports whether r, for the clean path p that Owns refused, is a browser loading
// a page: a GET or HEAD outside /api whose Accept names HTML (a browser's navigation sends
// "text/html,…"). Such a request gets the console, which shows its not-found page, instead of
// the gateway's JSON 401 or 404 that an API client gets: an API client sends no Accept,
// */*, or application/json, and everything under /api stays the API's whatever it accepts.
func (h *Handler) Navigation(r *http.Request, p string) bool {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		return false
	}
	// In any case: /API/runs is an API client's typo, and gets the API's JSON answer.
	if lower := strings.ToLower(p); lower == "/api" || strings.HasPrefix(lower, "/api/") {
		return false
	}
	return acceptsHTML(r.Header.Values("Accept"))
}

// acceptsHTML reports whether an Accept header names text/html or application/xhtml+xml
// itself, with a quality above 0 (a wildcard does not count: every client accepts JSON that way).
func acceptsHTML(values []string) bool {
	for _, v := range values {
		for _, part := range strings.Split(v, ",") {
			media, params, _ := strings.Cut(part, ";")
			media = strings.ToLower(strings.TrimSpace(media))
			if media != "text/html" && media != "application/xhtml+xml" {
				continue
			}
			if q, ok := quality(params); !ok || q > 0 {
				return true
			}
		}
	}
	return false
}

// quality reads q= from a media range's parameters; ok is false when there is none.
func quality(params string) (float64, bool) {
	for _, p := range strings.Split(params, ";") {
		k, v, _ := strings.Cut(strings.TrimSpace(p), "=")
		if strings.EqualFold(strings.TrimSpace(k), "q") {
			q, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err != nil {
				return 0, true
			}
			return q, true
		}
	}
	return 0, false
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
		h.serveFile(w, r, "assets/"+name, "public, max-age=31536000, immutable")
		return
	}
	if name := strings.TrimPrefix(r.URL.Path, "/"); rootFile(name) {
		h.serveFile(w, r, name, "public, max-age=86400")
		return
	}
	h.serveIndex(w, r, http.StatusOK)
}

// ServeNotFound answers a browser's navigation to a path that is no page (Navigation): 404,
// with index.html, whose app shows the not-found page and the way back.
func (h *Handler) ServeNotFound(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("X-Content-Type-Options", "nosniff")
	h.serveIndex(w, r, http.StatusNotFound)
}

func (h *Handler) serveFile(w http.ResponseWriter, r *http.Request, name, cache string) {
	b, err := fs.ReadFile(h.files, name)
	if err != nil {
		http.NotFound(w, r)
		return
	}
	ct := mime.TypeByExtension(path.Ext(name))
	if ct == "" {
		ct = "application/octet-stream"
	}
	w.Header().Set("Content-Type", ct)
	w.Header().Set("Cache-Control", cache)
	http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(b))
}

// serveIndex answers index.html with status; only a 200 is revalidated with its ETag.
func (h *Handler) serveIndex(w http.ResponseWriter, r *http.Request, status int) {
	hd := w.Header()
	hd.Set("Cache-Control", "no-cache")
	hd.Set("Content-Type", "text/html; charset=utf-8")
	hd.Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; style-src 'self'; frame-ancestors 'none'")
	hd.Set("X-Frame-Options", "DENY")
	if status == http.StatusOK {
		hd.Set("ETag", h.etag)
		if inm := r.Header.Get("If-None-Match"); inm == h.etag || inm == "W/"+h.etag {
			w.WriteHeader(http.StatusNotModified)
			return
		}
	}
	hd.Set("Content-Length", strconv.Itoa(len(h.index)))
	w.WriteHeader(status)
	if r.Method == http.MethodGet {
		_, _ = w.Write(h.index)
	}
}
