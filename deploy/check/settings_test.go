package check_test

import (
	"context"
	"path"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"svc.dev/deploy/check"
	"svc.dev/libs/env"
)

// optionalHeading is the section of deploy/README.md that lists the settings the manifests
// leave at their defaults on purpose.
const optionalHeading = "Settings left at their defaults"

// deployedEnv is the environment each service starts with under the dev overlay and under
// Docker Compose.
type deployedEnv struct {
	k8s, compose map[string]map[string]string
}

func loadDeployedEnv(t *testing.T, b bundle) deployedEnv {
	t.Helper()
	r, err := check.Render(b.path("deploy", "k8s", "overlays", "dev"))
	require.NoError(t, err)
	p, err := check.LoadCompose(context.Background(), b.path("deploy", "docker", "compose.yaml"), map[string]string{})
	require.NoError(t, err)
	e := deployedEnv{k8s: map[string]map[string]string{}, compose: map[string]map[string]string{}}
	for _, svc := range b.services {
		d := r.Deployment(svc)
		require.NotNil(t, d, "dev overlay: Deployment %s", svc)
		env, missing := r.Env(d.Spec.Template.Spec.Containers[0])
		require.Empty(t, missing)
		e.k8s[svc] = env
		cs, ok := p.Services[svc]
		require.True(t, ok, "compose: service %s", svc)
		e.compose[svc] = map[string]string{}
		for k, v := range cs.Environment {
			if v != nil {
				e.compose[svc][k] = *v
			}
		}
	}
	return e
}

// TestSettingsDeployed: every SVC_* (and OTEL_*) setting that a service's binary reads is set
// for that service by the dev overlay and by the compose file, or is listed in deploy/README.md
// as left at its default; a setting without a default is set everywhere it is read. And the
// reverse: the manifests set nothing the code does not read, and the README lists nothing
// the code does not read, so a renamed setting fails here instead of being silently ignored.
func TestSettingsDeployed(t *testing.T) {
	t.Parallel()
	b := setup(t)
	reads, err := check.SettingsRead(context.Background(), b.root, b.services)
	require.NoError(t, err)
	optional, err := check.OptionalSettings(b.path("deploy", "README.md"), optionalHeading)
	require.NoError(t, err)
	env := loadDeployedEnv(t, b)

	readAnywhere := map[string]bool{}
	setAnywhere := map[string]map[string]bool{"k8s": {}, "compose": {}}
	for _, svc := range b.services {
		require.NotEmpty(t, reads[svc], "%s reads no settings? the scan is broken", svc)
		own := "svc.dev/services/" + svc + "/"
		readBySvc := map[string]bool{}
		for _, rd := range reads[svc] {
			readAnywhere[rd.Name] = true
			readBySvc[rd.Name] = true
			for where, set := range map[string]map[string]string{"k8s": env.k8s[svc], "compose": env.compose[svc]} {
				_, isSet := set[rd.Name]
				switch {
				case rd.Required():
					require.True(t, isSet, "%s: %s has no default (%s) and is not set by %s", svc, rd.Name, rd.Pos, where)
				case rd.Pkg == strings.TrimSuffix(own, "/") || strings.HasPrefix(rd.Pkg, own):
					require.True(t, isSet || optional[rd.Name], "%s: %s (%s) is neither set by %s nor listed under %q in deploy/README.md", svc, rd.Name, rd.Pos, where, optionalHeading)
				}
			}
		}
		for where, set := range map[string]map[string]string{"k8s": env.k8s[svc], "compose": env.compose[svc]} {
			for name := range set {
				if strings.HasPrefix(name, "SVC_") || strings.HasPrefix(name, "OTEL_") {
					require.True(t, matchesAny(readBySvc, name), "%s: %s sets %s, which %s's code never reads", where, svc, name, svc)
					setAnywhere[where][name] = true
				}
			}
		}
	}
	// Settings of the shared packages (libs/boot, libs/telemetry): set for some service or
	// documented as optional.
	var names []string
	for n := range readAnywhere {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		for _, where := range []string{"k8s", "compose"} {
			require.True(t, setAnywhere[where][n] || optional[n], "%s is read by the code but neither set by %s nor listed under %q", n, where, optionalHeading)
		}
	}
	for n := range optional {
		require.True(t, readAnywhere[n], "deploy/README.md lists %s, which no service reads", n)
	}
}

// TestSettingsValid: every value the manifests give a setting passes the reader the code
// reads it with (libs/env: Addr, URL and its schemes, Int and its bounds, Duration, Secret and
// its length, OneOf and its choices), so a deployment never stops at start-up on a bad value.
func TestSettingsValid(t *testing.T) {
	t.Parallel()
	b := setup(t)
	reads, err := check.SettingsRead(context.Background(), b.root, b.services)
	require.NoError(t, err)
	env := loadDeployedEnv(t, b)
	var checked int
	for _, svc := range b.services {
		for _, rd := range reads[svc] {
			for where, set := range map[string]map[string]string{"k8s": env.k8s[svc], "compose": env.compose[svc]} {
				v, ok := set[rd.Name]
				if !ok {
					continue
				}
				err, known := validate(rd, v)
				if known {
					checked++
				}
				require.NoError(t, err, "%s %s: %s=%q (read at %s)", where, svc, rd.Name, v, rd.Pos)
			}
		}
	}
	require.Greater(t, checked, 20, "too few settings checked: the scan or the readers changed")
}

// TestStoresDeployed: a service that opens Postgres (or Redis) at start-up, by its own
// boot.Needs, is given SVC_DATABASE_URL (or SVC_REDIS_URL) everywhere it is deployed (the
// defaults point at 127.0.0.1, where no container has a database), and a service without a
// schema is not given the database credentials.
func TestStoresDeployed(t *testing.T) {
	t.Parallel()
	b := setup(t)
	env := loadDeployedEnv(t, b)
	for _, svc := range b.services {
		needs, err := check.StoreNeeds(b.root, svc)
		require.NoError(t, err)
		for where, set := range map[string]map[string]string{"k8s": env.k8s[svc], "compose": env.compose[svc]} {
			if needs.Postgres {
				require.Contains(t, set, "SVC_DATABASE_URL", "%s: %s needs Postgres", where, svc)
			} else {
				// The URL carries the database password: only the services with a schema get it.
				require.NotContains(t, set, "SVC_DATABASE_URL", "%s: %s has no schema but gets the database credentials", where, svc)
			}
			if needs.Redis {
				require.Contains(t, set, "SVC_REDIS_URL", "%s: %s needs Redis", where, svc)
			}
		}
	}
}

// validate runs value through the libs/env reader method rd was read with. known is false
// when the method or its arguments are not known statically; then nothing is checked.
func validate(rd check.Read, value string) (err error, known bool) {
	r := env.New(func(name string) (string, bool) { return value, name == rd.Name })
	arg := func(i int) int {
		n, _ := strconv.Atoi(rd.Args[i])
		return n
	}
	switch {
	case rd.Method == "Addr":
		r.Addr(rd.Name, "")
	case rd.Method == "Duration":
		r.Duration(rd.Name, 0)
	case rd.Method == "Bool":
		r.Bool(rd.Name, false)
	case !rd.ArgsKnown:
		return nil, false
	case rd.Method == "URL" && len(rd.Args) >= 1:
		r.URL(rd.Name, rd.Args[0], rd.Args[1:]...)
	case rd.Method == "Int" && len(rd.Args) == 3:
		r.Int(rd.Name, arg(0), arg(1), arg(2))
	case rd.Method == "Secret" && len(rd.Args) == 1:
		r.Secret(rd.Name, arg(0))
	case rd.Method == "OneOf" && len(rd.Args) >= 1:
		r.OneOf(rd.Name, rd.Args[0], rd.Args[1:]...)
	default:
		return nil, false
	}
	return r.Err(), true
}

// matchesAny says whether name is one of the names read, or matches one of the patterns read
// (SVC_WEBHOOK_*_SECRET).
func matchesAny(read map[string]bool, name string) bool {
	if read[name] {
		return true
	}
	for r := range read {
		if ok, _ := path.Match(r, name); ok && strings.Contains(r, "*") {
			return true
		}
	}
	return false
}
