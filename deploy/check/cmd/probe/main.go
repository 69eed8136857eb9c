// Command probe is the health check of the service images. The images are distroless (no
// shell, no curl), so Docker Compose's healthcheck runs this static binary instead:
// `probe http://127.0.0.1:8081/ready` exits 0 when the URL answers 2xx within the timeout and
// 1 otherwise, saying why on stderr. Kubernetes does not need it: its probes are httpGet.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"
)

func main() {
	timeout := flag.Duration("timeout", 3*time.Second, "how long the request may take")
	flag.Usage = func() {
		fmt.Fprintln(flag.CommandLine.Output(), "usage: probe [-timeout 3s] URL")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() != 1 {
		flag.Usage()
		os.Exit(2)
	}
	if err := probe(context.Background(), http.DefaultClient, flag.Arg(0), *timeout); err != nil {
		fmt.Fprintln(os.Stderr, "probe:", err)
		os.Exit(1)
	}
}

// errStatus is a probe that got an answer other than 2xx.
var errStatus = errors.New("unhealthy status")

// probe sends one GET to url and fails unless it answers 2xx within timeout.
func probe(ctx context.Context, client *http.Client, url string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return fmt.Errorf("%w %d: %s", errStatus, resp.StatusCode, body)
	}
	return nil
}
