package httpapi

import (
	"crypto/sha256"
	"encoding/hex"
	"log/slog"
	"net/http"
	"strconv"
	"strings"

	"svc.dev/proto/openapi"
)

// openAPIPath is where the gateway serves the public API's OpenAPI document. It is open, like
// /health, and answered by the gateway itself: the document is proto/openapi/svc.yaml, the
// one the route tests hold every router and this routing table to.
const openAPIPath = "/api/openapi.json"

// openAPIHandler serves the document as JSON, built once.
type openAPIHandler struct {
	body []byte
	etag string
	log  *slog.Logger
}

func newOpenAPIHandler(log *slog.Logger) *openAPIHandler {
	body, err := openapi.JSON()
	if err != nil {
		// The document is embedded at build time and tested; a failure is a programmer error.
		panic(err)
	}
	sum := sha256.Sum256(body)
	return &openAPIHandler{body: body, etag: `"` + hex.EncodeToString(sum[:16]) + `"`, log: log}
}

func (h *openAPIHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		writeError(w, r, h.log, errMethodNotAllowed)
		return
	}
	hd := w.Header()
	hd.Set("ETag", h.etag)
	hd.Set("Cache-Control", "no-cache")
	if etagMatches(r.Header.Get("If-None-Match"), h.etag) {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	hd.Set("Content-Type", "application/json")
	hd.Set("Content-Length", strconv.Itoa(len(h.body)))
	w.WriteHeader(http.StatusOK)
	if r.Method == http.MethodGet {
		_, _ = w.Write(h.body)
	}
}

// etagMatches reports whether an If-None-Match list names etag (or is "*"); weak forms match.
func etagMatches(header, etag string) bool {
	for _, v := range strings.Split(header, ",") {
		v = strings.TrimSpace(v)
		if v == "*" || v == etag || v == "W/"+etag {
			return true
		}
	}
	return false
}
