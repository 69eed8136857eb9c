package check

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"go.starlark.net/starlark"
	"go.starlark.net/syntax"
)

// Tilt is what a Tiltfile declared, recorded by stand-ins for Tilt's builtins. The stand-ins
// take the parameters of Tilt's own functions (docs.tilt.dev/api.html), so a misspelt keyword
// fails as it would under Tilt, and kustomize() really builds the directory it is given.
type Tilt struct {
	Root           string
	Loads          []string
	LocalResources map[string]LocalResource
	Images         map[string]ImageBuild
	K8sResources   map[string]K8sResource
	// Applied is every object given to k8s_yaml.
	Applied []*Rendered
}

// LocalResource is one local_resource.
type LocalResource struct {
	Name, Cmd    string
	Env          map[string]string
	Deps, Ignore []string
	ResourceDeps []string
	Labels       []string
}

// ImageBuild is one docker_build_with_restart.
type ImageBuild struct {
	Ref, Context, Dockerfile string
	BuildArgs                map[string]string
	Only, Entrypoint         []string
	Syncs                    []Sync
}

// Sync is one sync() step of a live update.
type Sync struct{ Local, Remote string }

// K8sResource is one k8s_resource.
type K8sResource struct {
	Workload     string
	PortForwards []string
	ResourceDeps []string
	Labels       []string
}

// blob is what kustomize() returns: YAML for k8s_yaml, here already rendered and decoded.
type blob struct{ r *Rendered }

func (b blob) String() string        { return "<blob " + b.r.Dir + ">" }
func (b blob) Type() string          { return "blob" }
func (b blob) Freeze()               {}
func (b blob) Truth() starlark.Bool  { return starlark.True }
func (b blob) Hash() (uint32, error) { return 0, fmt.Errorf("unhashable: blob") }

// syncStep is what sync() returns.
type syncStep struct{ s Sync }

func (s syncStep) String() string        { return fmt.Sprintf("sync(%q, %q)", s.s.Local, s.s.Remote) }
func (s syncStep) Type() string          { return "live_update_sync_step" }
func (s syncStep) Freeze()               {}
func (s syncStep) Truth() starlark.Bool  { return starlark.True }
func (s syncStep) Hash() (uint32, error) { return 0, fmt.Errorf("unhashable: sync step") }

// tiltDialect is the Starlark dialect Tilt runs Tiltfiles in: top-level for and if, while,
// set, recursion.
func tiltDialect() *syntax.FileOptions {
	return &syntax.FileOptions{Set: true, While: true, TopLevelControl: true, GlobalReassign: true, Recursion: true}
}

// RunTiltfile executes root/Tiltfile against the stand-ins and returns what it declared.
func RunTiltfile(root string) (*Tilt, error) {
	src, err := os.ReadFile(filepath.Join(root, "Tiltfile"))
	if err != nil {
		return nil, err
	}
	t := &Tilt{Root: root, LocalResources: map[string]LocalResource{}, Images: map[string]ImageBuild{}, K8sResources: map[string]K8sResource{}}
	predeclared := starlark.StringDict{
		"local_resource": starlark.NewBuiltin("local_resource", t.localResource),
		"k8s_yaml":       starlark.NewBuiltin("k8s_yaml", t.k8sYAML),
		"kustomize":      starlark.NewBuiltin("kustomize", t.kustomize),
		"k8s_resource":   starlark.NewBuiltin("k8s_resource", t.k8sResource),
		"sync":           starlark.NewBuiltin("sync", sync),
	}
	thread := &starlark.Thread{
		Name:  "Tiltfile",
		Load:  t.load,
		Print: func(*starlark.Thread, string) {},
	}
	if _, err := starlark.ExecFileOptions(tiltDialect(), thread, "Tiltfile", src, predeclared); err != nil {
		var ee *starlark.EvalError
		if errors.As(err, &ee) {
			return nil, fmt.Errorf("%s", ee.Backtrace())
		}
		return nil, err
	}
	return t, nil
}

// load knows the one extension the Tiltfile uses, restart_process.
func (t *Tilt) load(_ *starlark.Thread, module string) (starlark.StringDict, error) {
	t.Loads = append(t.Loads, module)
	if module != "ext://restart_process" {
		return nil, fmt.Errorf("the stand-ins know no extension %q", module)
	}
	return starlark.StringDict{
		"docker_build_with_restart": starlark.NewBuiltin("docker_build_with_restart", t.dockerBuildWithRestart),
	}, nil
}

func (t *Tilt) localResource(_ *starlark.Thread, fn *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var name, cmd, serveCmd, cmdBat, serveCmdBat, dir, serveDir, readiness starlark.String
	var deps, triggerMode, resourceDeps, ignore, links, tags, env, serveEnv, labels starlark.Value
	var autoInit, allowParallel starlark.Value
	if err := starlark.UnpackArgs(fn.Name(), args, kwargs,
		"name", &name, "cmd?", &cmd, "deps?", &deps, "trigger_mode?", &triggerMode,
		"resource_deps?", &resourceDeps, "ignore?", &ignore, "auto_init?", &autoInit,
		"serve_cmd?", &serveCmd, "cmd_bat?", &cmdBat, "serve_cmd_bat?", &serveCmdBat,
		"allow_parallel?", &allowParallel, "links?", &links, "tags?", &tags, "env?", &env,
		"serve_env?", &serveEnv, "readiness_probe?", &readiness, "dir?", &dir,
		"serve_dir?", &serveDir, "labels?", &labels); err != nil {
		return nil, err
	}
	r := LocalResource{Name: string(name), Cmd: string(cmd)}
	var err error
	if r.Env, err = stringMap("env", env); err != nil {
		return nil, err
	}
	for _, f := range []struct {
		dst *[]string
		v   starlark.Value
		n   string
	}{{&r.Deps, deps, "deps"}, {&r.Ignore, ignore, "ignore"}, {&r.ResourceDeps, resourceDeps, "resource_deps"}, {&r.Labels, labels, "labels"}} {
		if *f.dst, err = stringList(f.n, f.v); err != nil {
			return nil, err
		}
	}
	if _, dup := t.LocalResources[r.Name]; dup {
		return nil, fmt.Errorf("local_resource %q declared twice", r.Name)
	}
	t.LocalResources[r.Name] = r
	return starlark.None, nil
}

func (t *Tilt) dockerBuildWithRestart(_ *starlark.Thread, fn *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var ref, context, baseSuffix, restartFile, exitPolicy starlark.String
	var entrypoint, liveUpdate, trigger starlark.Value
	// docker_build's own parameters, passed through **kwargs.
	var buildArgs, dockerfile, dockerfileContents, matchInEnv, ignore, only, target, ssh, network, secret, extraTag, containerArgs, cacheFrom, pull, platform starlark.Value
	if err := starlark.UnpackArgs(fn.Name(), args, kwargs,
		"ref", &ref, "context", &context, "entrypoint", &entrypoint, "live_update", &liveUpdate,
		"base_suffix?", &baseSuffix, "restart_file?", &restartFile, "trigger?", &trigger, "exit_policy?", &exitPolicy,
		"build_args?", &buildArgs, "dockerfile?", &dockerfile, "dockerfile_contents?", &dockerfileContents,
		"match_in_env_vars?", &matchInEnv, "ignore?", &ignore, "only?", &only, "target?", &target,
		"ssh?", &ssh, "network?", &network, "secret?", &secret, "extra_tag?", &extraTag,
		"container_args?", &containerArgs, "cache_from?", &cacheFrom, "pull?", &pull, "platform?", &platform); err != nil {
		return nil, err
	}
	b := ImageBuild{Ref: string(ref), Context: string(context)}
	var err error
	if dockerfile != nil {
		s, ok := starlark.AsString(dockerfile)
		if !ok {
			return nil, fmt.Errorf("%s: dockerfile must be a string", fn.Name())
		}
		b.Dockerfile = s
	}
	if b.BuildArgs, err = stringMap("build_args", buildArgs); err != nil {
		return nil, err
	}
	if b.Only, err = stringList("only", only); err != nil {
		return nil, err
	}
	if b.Entrypoint, err = stringList("entrypoint", entrypoint); err != nil {
		return nil, err
	}
	steps, ok := liveUpdate.(*starlark.List)
	if !ok {
		return nil, fmt.Errorf("%s: live_update must be a list of steps", fn.Name())
	}
	for i := range steps.Len() {
		s, ok := steps.Index(i).(syncStep)
		if !ok {
			return nil, fmt.Errorf("%s: live_update step %s is not known to the stand-ins", fn.Name(), steps.Index(i).Type())
		}
		b.Syncs = append(b.Syncs, s.s)
	}
	if _, dup := t.Images[b.Ref]; dup {
		return nil, fmt.Errorf("image %q built twice", b.Ref)
	}
	t.Images[b.Ref] = b
	return starlark.None, nil
}

func sync(_ *starlark.Thread, fn *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var local, remote starlark.String
	if err := starlark.UnpackArgs(fn.Name(), args, kwargs, "local_path", &local, "remote_path", &remote); err != nil {
		return nil, err
	}
	return syncStep{Sync{Local: string(local), Remote: string(remote)}}, nil
}

func (t *Tilt) kustomize(_ *starlark.Thread, fn *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var path starlark.String
	var bin, flags starlark.Value
	if err := starlark.UnpackArgs(fn.Name(), args, kwargs, "pathToDir", &path, "kustomize_bin?", &bin, "flags?", &flags); err != nil {
		return nil, err
	}
	r, err := Render(filepath.Join(t.Root, string(path)))
	if err != nil {
		return nil, err
	}
	return blob{r}, nil
}

func (t *Tilt) k8sYAML(_ *starlark.Thread, fn *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var yaml, allowDuplicates starlark.Value
	if err := starlark.UnpackArgs(fn.Name(), args, kwargs, "yaml", &yaml, "allow_duplicates?", &allowDuplicates); err != nil {
		return nil, err
	}
	b, ok := yaml.(blob)
	if !ok {
		return nil, fmt.Errorf("%s: the stand-ins take only kustomize() output, got %s", fn.Name(), yaml.Type())
	}
	t.Applied = append(t.Applied, b.r)
	return starlark.None, nil
}

func (t *Tilt) k8sResource(_ *starlark.Thread, fn *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var workload, newName, triggerMode, podReadiness, discovery starlark.String
	var portForwards, extraSelectors, resourceDeps, objects, autoInit, links, labels starlark.Value
	if err := starlark.UnpackArgs(fn.Name(), args, kwargs,
		"workload?", &workload, "new_name?", &newName, "port_forwards?", &portForwards,
		"extra_pod_selectors?", &extraSelectors, "trigger_mode?", &triggerMode,
		"resource_deps?", &resourceDeps, "objects?", &objects, "auto_init?", &autoInit,
		"pod_readiness?", &podReadiness, "links?", &links, "labels?", &labels,
		"discovery_strategy?", &discovery); err != nil {
		return nil, err
	}
	r := K8sResource{Workload: string(workload)}
	var err error
	if r.PortForwards, err = stringList("port_forwards", portForwards); err != nil {
		return nil, err
	}
	if r.ResourceDeps, err = stringList("resource_deps", resourceDeps); err != nil {
		return nil, err
	}
	if r.Labels, err = stringList("labels", labels); err != nil {
		return nil, err
	}
	name := r.Workload
	if newName != "" {
		name = string(newName)
	}
	if _, dup := t.K8sResources[name]; dup {
		return nil, fmt.Errorf("k8s_resource %q configured twice", name)
	}
	t.K8sResources[name] = r
	return starlark.None, nil
}

// stringList accepts what Tilt accepts for a list of names: None, a string, an int (ports) or
// a list of those.
func stringList(what string, v starlark.Value) ([]string, error) {
	switch v := v.(type) {
	case nil, starlark.NoneType:
		return nil, nil
	case starlark.String:
		return []string{string(v)}, nil
	case starlark.Int:
		return []string{v.String()}, nil
	case *starlark.List:
		var out []string
		for i := range v.Len() {
			s, err := stringList(what, v.Index(i))
			if err != nil {
				return nil, err
			}
			out = append(out, s...)
		}
		return out, nil
	}
	return nil, fmt.Errorf("%s: want a string or a list of strings, got %s", what, v.Type())
}

// stringMap accepts a dict of strings to strings, or None.
func stringMap(what string, v starlark.Value) (map[string]string, error) {
	out := map[string]string{}
	switch v := v.(type) {
	case nil, starlark.NoneType:
		return out, nil
	case *starlark.Dict:
		for _, item := range v.Items() {
			k, ok1 := starlark.AsString(item[0])
			val, ok2 := starlark.AsString(item[1])
			if !ok1 || !ok2 {
				return nil, fmt.Errorf("%s: want strings, got %s: %s", what, item[0].Type(), item[1].Type())
			}
			out[k] = val
		}
		return out, nil
	}
	return nil, fmt.Errorf("%s: want a dict, got %s", what, v.Type())
}

// Workloads is every workload the applied YAML declares, by name; Tilt makes one resource of
// each.
func (t *Tilt) Workloads() map[string]bool {
	w := map[string]bool{}
	for _, r := range t.Applied {
		for _, o := range r.Objects {
			switch o.Kind {
			case "Deployment", "StatefulSet", "DaemonSet", "Job", "CronJob", "ReplicaSet", "Pod":
				w[o.Name] = true
			}
		}
	}
	return w
}

// Resources returns the names of every resource Tilt would have: local resources and one per
// workload (renamed by k8s_resource new_name when given).
func (t *Tilt) Resources() map[string]bool {
	res := map[string]bool{}
	for n := range t.LocalResources {
		res[n] = true
	}
	for w := range t.Workloads() {
		res[w] = true
	}
	for n, r := range t.K8sResources {
		if n != r.Workload {
			delete(res, r.Workload)
			res[n] = true
		}
	}
	return res
}
