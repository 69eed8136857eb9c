package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	api "svc.dev/clients/apiclient"
	"svc.dev/clients/mcptools"
	"svc.dev/libs/buildinfo"
)

// mcpPath is where the gateway serves the MCP tools over streamable HTTP (docs/MCP.md).
const mcpPath = "/api/mcp"

// selfBaseURL is the address the MCP tools' API client is given. Its requests never leave
// the process (selfTransport); the host only names them in logs and errors.
const selfBaseURL = "http://gateway.internal"

// mcpCallTimeout bounds one API call a tool makes; runs_wait's own bound is shorter.
const mcpCallTimeout = 150 * time.Second

// newMCPHandler serves the MCP tools. Each tool call is one or more public API requests that
// go back through this gateway's own handler (guard, rate limit, routing table) carrying the
// caller's credentials, so an MCP caller gets exactly what the same requests over HTTP would:
// its organization only, its bucket, its revocations.
//
// The handler is stateless: no MCP session lives in a replica's memory, so any replica can
// answer any request, and every request is authorized on its own.
func newMCPHandler(log *slog.Logger, self http.Handler) http.Handler {
	client, err := api.NewClient(selfBaseURL, &http.Client{Transport: selfTransport{h: self, log: log}, Timeout: mcpCallTimeout}, "svc-mcp/"+buildinfo.Version())
	if err != nil {
		panic(err) // selfBaseURL is a constant
	}
	server := mcptools.NewServer(mcptools.Config{Principal: callerPrincipal(client), Version: buildinfo.Version()})
	return mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, &mcp.StreamableHTTPOptions{
		Stateless:    true,
		JSONResponse: true,
		Logger:       log,
		// The SDK refuses requests that reach a loopback address under another Host name, a
		// defence against DNS rebinding for servers that trust whoever can reach them. Here
		// every request needs credentials, which a rebinding page does not have; and a reverse
		// proxy on the same host (a public Host arriving on loopback) must keep working.
		DisableLocalhostProtection: true,
		MaxRequestBodyBytes:        1 << 20, // the API's body limit (docs/API.md, "Limits")
	})
}

// callerPrincipal makes each tool call act as the HTTP request that carried it.
func callerPrincipal(client *api.Client) mcptools.PrincipalFunc {
	return func(_ context.Context, extra *mcp.RequestExtra) (mcptools.Principal, error) {
		if extra == nil || extra.Header == nil {
			return mcptools.Principal{}, errors.New("no HTTP request carries this call")
		}
		return mcptools.Principal{Client: client.WithAuth(callerAuth(extra.Header))}, nil
	}
}

// callerAuth is the credential the caller presented, as the guard read it.
func callerAuth(h http.Header) api.Auth {
	a := api.Auth{Cookie: h.Get("Cookie")}
	if v := strings.TrimSpace(h.Get("Authorization")); len(v) > len("bearer ") && strings.EqualFold(v[:len("bearer ")], "bearer ") {
		a.APIKey = strings.TrimSpace(v[len("bearer "):])
	} else if k := strings.TrimSpace(h.Get("X-Api-Key")); k != "" {
		a.APIKey = k // sent on as a bearer token, which the guard takes for a key as well
	}
	return a
}

// selfTransport answers the MCP tools' API requests with the gateway's own handler, in
// process: no loopback connection, no second trip through the listener's middleware. The
// answer is handed over as soon as its status is written and its body is read while the
// handler writes it, so a run's event stream (runs_wait) comes through event by event.
type selfTransport struct {
	h   http.Handler
	log *slog.Logger
}

func (t selfTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if cleanPath(req.URL.Path) == mcpPath {
		return nil, errors.New("the MCP tools do not call the MCP endpoint")
	}
	in := req.Clone(withOriginVouched(req.Context()))
	in.RequestURI = req.URL.RequestURI()
	if in.Body == nil {
		in.Body = http.NoBody
	}
	body, out := io.Pipe()
	w := &pipeWriter{header: http.Header{}, body: out, ready: make(chan struct{})}
	go func() {
		defer func() {
			if v := recover(); v != nil {
				// The reverse proxy aborts an answer it cannot copy (the client closed it, or
				// the service went away) with http.ErrAbortHandler, which a server recovers;
				// this goroutine is that server.
				if v != http.ErrAbortHandler { //nolint:errorlint // panic values are compared as they are
					t.log.ErrorContext(in.Context(), "in-process API request panicked", "path", in.URL.Path, "panic", v)
				}
				if w.started() {
					_ = out.CloseWithError(fmt.Errorf("the API handler panicked: %v", v)) // the answer is cut
					return
				}
				writeError(w, in, t.log, errHandlerPanicked)
				_ = out.Close()
				return
			}
			w.WriteHeader(http.StatusOK) // a handler that wrote nothing answered 200
			_ = out.Close()
		}()
		t.h.ServeHTTP(w, in)
	}()
	<-w.ready
	return &http.Response{
		Status:        http.StatusText(w.status),
		StatusCode:    w.status,
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        w.sent,
		Body:          body,
		ContentLength: -1,
		Request:       req,
	}, nil
}

// pipeWriter is the http.ResponseWriter of an in-process request: the header as it was when
// the status was written, and the body through a pipe the client reads.
type pipeWriter struct {
	header http.Header
	body   *io.PipeWriter
	once   sync.Once
	ready  chan struct{} // closed once status and sent are set
	status int
	sent   http.Header
}

func (w *pipeWriter) Header() http.Header { return w.header }

func (w *pipeWriter) WriteHeader(status int) {
	w.once.Do(func() {
		w.status, w.sent = status, w.header.Clone()
		close(w.ready)
	})
}

func (w *pipeWriter) started() bool {
	select {
	case <-w.ready:
		return true
	default:
		return false
	}
}

// Write blocks until the client has read b (or closed the body: then it fails, and the
// handler stops).
func (w *pipeWriter) Write(b []byte) (int, error) {
	w.WriteHeader(http.StatusOK)
	return w.body.Write(b)
}

// Flush lets the reverse proxy's streaming (FlushInterval -1) run: every write already
// reaches the client as it is made.
func (w *pipeWriter) Flush() { w.WriteHeader(http.StatusOK) }

// serveMCPWithJSONErrors serves r with the MCP handler, keeping the API's error shape (every
// error is JSON {error, message}: docs/API.md, "Conventions"). The SDK answers transport-level
// refusals (a method, Accept or Content-Type it does not take, a body that is not JSON-RPC) in
// plain text; those become invalid_body, method_not_allowed or payload_too_large JSON errors
// with the SDK's words as the message (errors.go). A caller that accepts JSON but did not list
// text/event-stream is served anyway: this endpoint answers with JSON only.
func serveMCPWithJSONErrors(w http.ResponseWriter, r *http.Request, log *slog.Logger, h http.Handler) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		writeError(w, r, log, &mcpMethodError{method: r.Method})
		return
	}
	if accept := r.Header.Get("Accept"); !strings.Contains(accept, "text/event-stream") || !strings.Contains(accept, "application/json") {
		if accept != "" && !strings.Contains(accept, "application/json") && !strings.Contains(accept, "*/*") {
			writeError(w, r, log, &mcpAcceptError{accept: accept})
			return
		}
		r.Header.Set("Accept", "application/json, text/event-stream")
	}
	jw := &jsonErrorWriter{w: w}
	h.ServeHTTP(jw, r)
	jw.finish(r, log)
}

// jsonErrorWriter passes a success through and holds back an error answer, which finish
// rewrites as the API's JSON error (unless it is one already).
type jsonErrorWriter struct {
	w       http.ResponseWriter
	status  int
	held    bool
	text    bytes.Buffer
	started bool
}

func (j *jsonErrorWriter) Header() http.Header { return j.w.Header() }

func (j *jsonErrorWriter) WriteHeader(status int) {
	if j.started || j.held {
		return
	}
	if status >= 400 {
		j.status, j.held = status, true
		return
	}
	j.started = true
	j.w.WriteHeader(status)
}

func (j *jsonErrorWriter) Write(b []byte) (int, error) {
	if !j.started && !j.held {
		j.WriteHeader(http.StatusOK)
	}
	if j.held {
		return j.text.Write(b)
	}
	return j.w.Write(b)
}

// Flush lets the SDK flush a streamed answer (JSON answers are written whole).
func (j *jsonErrorWriter) Flush() {
	if f, ok := j.w.(http.Flusher); ok && j.started {
		f.Flush()
	}
}

func (j *jsonErrorWriter) finish(r *http.Request, log *slog.Logger) {
	if !j.held {
		return
	}
	msg := strings.TrimSpace(j.text.String())
	var body struct {
		Error json.RawMessage `json:"error"`
	}
	if json.Unmarshal(j.text.Bytes(), &body) == nil && len(body.Error) > 0 {
		var code string
		if json.Unmarshal(body.Error, &code) == nil { // the API's shape already
			j.w.WriteHeader(j.status)
			_, _ = j.w.Write(j.text.Bytes())
			return
		}
		var rpc struct {
			Message string `json:"message"`
		}
		if json.Unmarshal(body.Error, &rpc) == nil && rpc.Message != "" { // a JSON-RPC error
			msg = rpc.Message
		}
	}
	if msg == "" {
		msg = http.StatusText(j.status)
	}
	j.w.Header().Del("Content-Length") // the SDK's length, if any, was of its own text
	writeError(j.w, r, log, &mcpRefusedError{status: j.status, message: msg})
}
