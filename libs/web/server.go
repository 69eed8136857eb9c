package web

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"
)

// Server is an HTTP server with every timeout set and a graceful stop.
type Server struct {
	srv      *http.Server
	log      *slog.Logger
	listener net.Listener
	drain    time.Duration
}

// Listen opens addr (":0" picks a free port) and prepares to serve h on it.
func Listen(addr string, h http.Handler, log *slog.Logger, drain time.Duration) (*Server, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen %s: %w", addr, err)
	}
	return &Server{
		srv: &http.Server{
			Handler:           h,
			ReadHeaderTimeout: 5 * time.Second,
			ReadTimeout:       30 * time.Second,
			WriteTimeout:      60 * time.Second,
			IdleTimeout:       120 * time.Second,
			MaxHeaderBytes:    maxHeaderRead, // HeaderLimit answers past MaxHeaderBytes, in JSON
			ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
		},
		log:      log,
		listener: ln,
		drain:    drain,
	}, nil
}

// Addr is the address actually listened on.
func (s *Server) Addr() string { return s.listener.Addr().String() }

// Close releases the listener of a server that never served.
func (s *Server) Close() { _ = s.listener.Close() }

// Serve serves until ctx is done, then stops accepting and waits up to the drain time for
// in-flight requests before closing what is left.
func (s *Server) Serve(ctx context.Context) error {
	errc := make(chan error, 1)
	go func() { errc <- s.srv.Serve(s.listener) }()
	select {
	case err := <-errc:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.drain)
	defer cancel()
	if err := s.srv.Shutdown(shutdownCtx); err != nil {
		s.log.Warn("drain cut short", "err", err)
		_ = s.srv.Close()
	}
	if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serve: %w", err)
	}
	return nil
}
