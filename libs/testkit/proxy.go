package testkit

import (
	"io"
	"net"
	"sync"
	"testing"
)

// Proxy is a TCP forwarder between a service and a server (Postgres, Redis). Stop cuts every
// connection and refuses new ones, which is what the service sees when the server goes down;
// Start brings it back on the same address.
type Proxy struct {
	tb     testing.TB
	target string
	addr   string

	mu    sync.Mutex
	ln    net.Listener
	conns map[net.Conn]struct{}
}

// NewProxy starts a proxy to target ("host:port") on a free local port.
func NewProxy(tb testing.TB, target string) *Proxy {
	tb.Helper()
	p := &Proxy{tb: tb, target: target, conns: map[net.Conn]struct{}{}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatalf("testkit: proxy listen: %v", err)
	}
	p.addr = ln.Addr().String()
	p.serve(ln)
	tb.Cleanup(p.Stop)
	return p
}

// Addr is where clients connect.
func (p *Proxy) Addr() string { return p.addr }

// Stop closes the listener and every open connection.
func (p *Proxy) Stop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln != nil {
		_ = p.ln.Close()
		p.ln = nil
	}
	for c := range p.conns {
		_ = c.Close()
	}
	clear(p.conns)
}

// Start listens again on the same address after a Stop.
func (p *Proxy) Start() {
	p.tb.Helper()
	ln, err := net.Listen("tcp", p.addr)
	if err != nil {
		p.tb.Fatalf("testkit: proxy relisten: %v", err)
	}
	p.serve(ln)
}

func (p *Proxy) serve(ln net.Listener) {
	p.mu.Lock()
	p.ln = ln
	p.mu.Unlock()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go p.pipe(c)
		}
	}()
}

func (p *Proxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln == nil {
		_ = c.Close()
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *Proxy) pipe(client net.Conn) {
	if !p.track(client) {
		return
	}
	server, err := net.Dial("tcp", p.target)
	if err != nil || !p.track(server) {
		_ = client.Close()
		return
	}
	done := make(chan struct{}, 2)
	cp := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src) // either side closing, for whatever reason, ends both
		_ = dst.Close()
		_ = src.Close()
		done <- struct{}{}
	}
	go cp(server, client)
	go cp(client, server)
	<-done
	<-done
	p.mu.Lock()
	delete(p.conns, client)
	delete(p.conns, server)
	p.mu.Unlock()
}
