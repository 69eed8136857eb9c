package main

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// Settings every service reads. They are named here once so the supervisor, the health checks
// and the tests agree on them.
const (
	envDatabaseURL    = "SVC_DATABASE_URL"
	envRedisURL       = "SVC_REDIS_URL"
	envInternalSecret = "SVC_INTERNAL_SECRET"

	// envGatewayAdminAddr places the gateway's probe listener (/health, /ready, /metrics),
	// kept apart from its public one, where every path but the open ones needs credentials.
	envGatewayAdminAddr     = "SVC_GATEWAY_ADMIN_ADDR"
	defaultGatewayAdminAddr = ":8090"

	// minSecretLen matches what the services demand of the HMAC key, so a short secret stops
	// devstack with one clear message instead of six services failing at once.
	minSecretLen = 32
)

// service is one binary of the system and the settings that place it on the network.
type service struct {
	name        string
	addrEnv     string // where it listens
	defaultAddr string
	urlEnv      string // where its peers find it; empty for the gateway, which no peer calls
}

// allServices lists every binary, backends first and the gateway last: the gateway resolves
// credentials through identity on its first request, so it starts once the backends answer.
func allServices() []service {
	return []service{
		{name: "identity", addrEnv: "SVC_IDENTITY_ADDR", defaultAddr: ":8081", urlEnv: "SVC_IDENTITY_URL"},
		{name: "workflow-editor", addrEnv: "SVC_EDITOR_ADDR", defaultAddr: ":8082", urlEnv: "SVC_EDITOR_URL"},
		{name: "run-orchestrator", addrEnv: "SVC_ORCHESTRATOR_ADDR", defaultAddr: ":8083", urlEnv: "SVC_ORCHESTRATOR_URL"},
		{name: "scheduler", addrEnv: "SVC_SCHEDULER_ADDR", defaultAddr: ":8084", urlEnv: "SVC_SCHEDULER_URL"},
		{name: "webhook-ingress", addrEnv: "SVC_WEBHOOK_ADDR", defaultAddr: ":8085", urlEnv: "SVC_WEBHOOK_URL"},
		{name: "gateway", addrEnv: "SVC_PUBLIC_ADDR", defaultAddr: ":8080"},
	}
}

// selectServices returns the services named in only (all of them when only is empty), in start
// order, so -only never changes the order the backends and the gateway come up in.
func selectServices(only []string) ([]service, error) {
	all := allServices()
	if len(only) == 0 {
		return all, nil
	}
	var selected []service
	for _, s := range all {
		if slices.Contains(only, s.name) {
			selected = append(selected, s)
		}
	}
	for _, name := range only {
		if !slices.ContainsFunc(all, func(s service) bool { return s.name == name }) {
			return nil, fmt.Errorf("-only: unknown service %q (known: %s)", name, serviceNames(all))
		}
	}
	return selected, nil
}

func serviceNames(svcs []service) string {
	names := make([]string, 0, len(svcs))
	for _, s := range svcs {
		names = append(names, s.name)
	}
	return strings.Join(names, ", ")
}

// envMap reads an environment list (os.Environ's shape) into a map. Later entries win, as they
// do for a child process started with that list. An empty value counts as unset, so
// `SVC_REDIS_URL= make run` means "find one for me".
func envMap(environ []string) map[string]string {
	m := make(map[string]string, len(environ))
	for _, kv := range environ {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			continue
		}
		if v == "" {
			delete(m, k)
			continue
		}
		m[k] = v
	}
	return m
}

// endpoints are the listen addresses and peer URLs every child gets, the user's own where set.
type endpoints struct {
	addr map[string]string // service name → listen address
	vars map[string]string // every *_ADDR and *_URL variable → value
	// gatewayAdmin is where the gateway serves its probes.
	gatewayAdmin string
}

// resolveEndpoints fills in every *_ADDR and *_URL setting. Each child gets all of them, even
// the ones it does not read, so a user who moves one service (SVC_EDITOR_ADDR=:9082) moves the
// URL its peers use with it, unless SVC_EDITOR_URL says otherwise.
func resolveEndpoints(env map[string]string) (endpoints, error) {
	e := endpoints{addr: map[string]string{}, vars: map[string]string{}}
	for _, s := range allServices() {
		addr := s.defaultAddr
		if v, ok := env[s.addrEnv]; ok {
			addr = v
		}
		if _, _, err := net.SplitHostPort(addr); err != nil {
			return endpoints{}, fmt.Errorf("%s=%q is not host:port: %w", s.addrEnv, addr, err)
		}
		e.addr[s.name] = addr
		e.vars[s.addrEnv] = addr
		if s.urlEnv == "" {
			continue
		}
		if v, ok := env[s.urlEnv]; ok {
			e.vars[s.urlEnv] = v
			continue
		}
		u, err := dialURL(addr, "127.0.0.1")
		if err != nil {
			return endpoints{}, fmt.Errorf("%s: %w", s.addrEnv, err)
		}
		e.vars[s.urlEnv] = u
	}
	// The gateway's second listener, for probes (/health, /ready, /metrics).
	admin := defaultGatewayAdminAddr
	if v, ok := env[envGatewayAdminAddr]; ok {
		admin = v
	}
	if _, _, err := net.SplitHostPort(admin); err != nil {
		return endpoints{}, fmt.Errorf("%s=%q is not host:port: %w", envGatewayAdminAddr, admin, err)
	}
	e.gatewayAdmin = admin
	e.vars[envGatewayAdminAddr] = admin
	return e, nil
}

// dialURL turns a listen address into a URL a client on this machine can dial. A wildcard
// host (":8080", "0.0.0.0:8080", "[::]:8080") is replaced by wildcardHost: the services use
// 127.0.0.1 between themselves (no resolver involved), while humans get "localhost".
func dialURL(addr, wildcardHost string) (string, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", fmt.Errorf("%q is not host:port: %w", addr, err)
	}
	if port == "" || port == "0" {
		return "", fmt.Errorf("%q has no fixed port to dial", addr)
	}
	if host == "" || host == "0.0.0.0" || host == "::" {
		host = wildcardHost
	}
	return "http://" + net.JoinHostPort(host, port), nil
}

// baseURL is the address printed for humans, derived from SVC_PUBLIC_ADDR.
func baseURL(publicAddr string) (string, error) {
	return dialURL(publicAddr, "localhost")
}

// secretFile is the file of the state folder that keeps the internal secret devstack made.
const secretFile = "internal-secret"

// secret is the internal secret every service shares, and where it came from.
type secret struct {
	value string
	file  string // where it is kept; empty when SVC_INTERNAL_SECRET set it
	fresh bool   // made by this run
}

// internalSecret returns the user's SVC_INTERNAL_SECRET; else the one an earlier run kept in
// stateDir; else a fresh random one, which it keeps there (mode 0600) for the next runs.
// Identity signs session cookies with a key derived from it, so a new secret on every start
// would sign out every browser and every saved `svc login` (and `svc logout --revoke`,
// which needs the session, would fail); a fixed default would end up used somewhere it
// should not be.
func internalSecret(env map[string]string, stateDir string) (secret, error) {
	if s, ok := env[envInternalSecret]; ok {
		if len(s) < minSecretLen {
			return secret{}, fmt.Errorf("%s must be at least %d bytes (it has %d); unset it to get a random one",
				envInternalSecret, minSecretLen, len(s))
		}
		return secret{value: s}, nil
	}
	file := filepath.Join(stateDir, secretFile)
	b, err := os.ReadFile(file)
	switch {
	case err == nil:
		s := strings.TrimSpace(string(b))
		if len(s) < minSecretLen {
			return secret{}, fmt.Errorf("%s holds %d bytes, fewer than the %d of a secret; delete it to get a new one "+
				"(sessions signed with the old one end)", file, len(s), minSecretLen)
		}
		return secret{value: s, file: file}, nil
	case !errors.Is(err, fs.ErrNotExist):
		return secret{}, fmt.Errorf("read the kept %s: %w", envInternalSecret, err)
	}
	raw := make([]byte, minSecretLen)
	if _, err := rand.Read(raw); err != nil {
		return secret{}, fmt.Errorf("generate %s: %w", envInternalSecret, err)
	}
	s := hex.EncodeToString(raw)
	if err := writeSecret(file, s); err != nil {
		return secret{}, fmt.Errorf("keep %s: %w", envInternalSecret, err)
	}
	return secret{value: s, file: file, fresh: true}, nil
}

// writeSecret writes s to file, readable by its owner only, all at once: a temporary file of
// the same folder renamed over it, so that a run stopped halfway leaves no partial secret.
func writeSecret(file, s string) error {
	if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(file), secretFile+".*.tmp") // mode 0600
	if err != nil {
		return err
	}
	defer func() { _ = os.Remove(tmp.Name()) }() // gone after the rename; cleans up after a failure
	if _, err := tmp.WriteString(s + "\n"); err != nil {
		_ = tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), file)
}

// mergeEnv returns parent with overrides applied: every parent variable passes through (so each
// SVC_* and OTEL_* setting the user exported reaches every service), overridden keys keep their
// place and take the new value, duplicates are dropped, and new keys follow in sorted order so
// the result does not depend on map iteration.
func mergeEnv(parent []string, overrides map[string]string) []string {
	out := make([]string, 0, len(parent)+len(overrides))
	seen := make(map[string]int, len(parent))
	for _, kv := range parent {
		k, _, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			continue
		}
		if v, ok := overrides[k]; ok {
			kv = k + "=" + v
		}
		if i, dup := seen[k]; dup {
			out[i] = kv // the last one wins, as it would in the child
			continue
		}
		seen[k] = len(out)
		out = append(out, kv)
	}
	keys := make([]string, 0, len(overrides))
	for k := range overrides {
		if _, ok := seen[k]; !ok {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	for _, k := range keys {
		out = append(out, k+"="+overrides[k])
	}
	return out
}
