package check

import (
	"fmt"
	"io/fs"
	"path/filepath"
	"sort"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

// Object is one rendered Kubernetes object, decoded into its API type.
type Object struct {
	Kind string
	Name string
	// Typed is *appsv1.Deployment, *corev1.Service, ... as registered in decoder.
	Typed runtime.Object
}

// Rendered is the output of one kustomize build.
type Rendered struct {
	Dir     string
	Objects []Object
}

// Kustomizations lists every directory under dir (deploy/) that holds a kustomization.yaml:
// each service base, the overlays and any other kustomize root, so a new one is checked
// without being named here.
func Kustomizations(dir string) ([]string, error) {
	var dirs []string
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && d.Name() == "kustomization.yaml" {
			dirs = append(dirs, filepath.Dir(path))
		}
		return nil
	})
	sort.Strings(dirs)
	return dirs, err
}

// The kinds deploy/k8s may use. Anything else fails to decode, so a new kind is a conscious
// addition here (with its API group registered for strict decoding).
func newDecoder() runtime.Decoder {
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{
		corev1.AddToScheme, appsv1.AddToScheme, autoscalingv2.AddToScheme, policyv1.AddToScheme,
	} {
		if err := add(scheme); err != nil {
			panic(err) // registering the built-in API types cannot fail
		}
	}
	return serializer.NewCodecFactory(scheme, serializer.EnableStrict).UniversalDeserializer()
}

// Render runs `kustomize build dir` through kustomize's Go API with the CLI's default options
// (files only from inside each kustomization root, no plugins), then decodes every object
// strictly into its Kubernetes API type: an unknown or duplicated field, a wrong type or an
// unregistered kind is an error.
func Render(dir string) (*Rendered, error) {
	k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	m, err := k.Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		return nil, fmt.Errorf("kustomize build %s: %w", dir, err)
	}
	dec := newDecoder()
	out := &Rendered{Dir: dir}
	for _, r := range m.Resources() {
		js, err := r.MarshalJSON()
		if err != nil {
			return nil, fmt.Errorf("%s %s: %w", r.GetKind(), r.GetName(), err)
		}
		obj, gvk, err := dec.Decode(js, nil, nil)
		if err != nil {
			return nil, fmt.Errorf("%s: %s %s: %w", dir, r.GetKind(), r.GetName(), err)
		}
		out.Objects = append(out.Objects, Object{Kind: gvk.Kind, Name: r.GetName(), Typed: obj})
	}
	return out, nil
}

// Deployment returns the Deployment called name, nil if there is none.
func (r *Rendered) Deployment(name string) *appsv1.Deployment {
	for _, o := range r.Objects {
		if d, ok := o.Typed.(*appsv1.Deployment); ok && d.Name == name {
			return d
		}
	}
	return nil
}

// Service returns the Service called name, nil if there is none.
func (r *Rendered) Service(name string) *corev1.Service {
	for _, o := range r.Objects {
		if s, ok := o.Typed.(*corev1.Service); ok && s.Name == name {
			return s
		}
	}
	return nil
}

// Deployments returns every Deployment.
func (r *Rendered) Deployments() []*appsv1.Deployment {
	var ds []*appsv1.Deployment
	for _, o := range r.Objects {
		if d, ok := o.Typed.(*appsv1.Deployment); ok {
			ds = append(ds, d)
		}
	}
	return ds
}

// ConfigMap returns the ConfigMap called name, nil if there is none.
func (r *Rendered) ConfigMap(name string) *corev1.ConfigMap {
	for _, o := range r.Objects {
		if c, ok := o.Typed.(*corev1.ConfigMap); ok && c.Name == name {
			return c
		}
	}
	return nil
}

// Secret returns the Secret called name, nil if there is none.
func (r *Rendered) Secret(name string) *corev1.Secret {
	for _, o := range r.Objects {
		if s, ok := o.Typed.(*corev1.Secret); ok && s.Name == name {
			return s
		}
	}
	return nil
}

// HPA returns the HorizontalPodAutoscaler whose target is the Deployment called name.
func (r *Rendered) HPA(deployment string) *autoscalingv2.HorizontalPodAutoscaler {
	for _, o := range r.Objects {
		if h, ok := o.Typed.(*autoscalingv2.HorizontalPodAutoscaler); ok &&
			h.Spec.ScaleTargetRef.Kind == "Deployment" && h.Spec.ScaleTargetRef.Name == deployment {
			return h
		}
	}
	return nil
}

// PDBs returns every PodDisruptionBudget.
func (r *Rendered) PDBs() []*policyv1.PodDisruptionBudget {
	var ps []*policyv1.PodDisruptionBudget
	for _, o := range r.Objects {
		if p, ok := o.Typed.(*policyv1.PodDisruptionBudget); ok {
			ps = append(ps, p)
		}
	}
	return ps
}

// Env is the environment a container starts with, as far as the rendered objects say: its
// env entries (literal values, or the value of the ConfigMap or Secret key they name) and
// every key of the ConfigMaps and Secrets in envFrom. Missing is every reference
// that does not resolve to an object (or key) in r.
func (r *Rendered) Env(c corev1.Container) (env map[string]string, missing []string) {
	env = map[string]string{}
	for _, from := range c.EnvFrom {
		switch {
		case from.ConfigMapRef != nil:
			cm := r.ConfigMap(from.ConfigMapRef.Name)
			if cm == nil {
				missing = append(missing, "ConfigMap "+from.ConfigMapRef.Name)
				continue
			}
			for k, v := range cm.Data {
				env[from.Prefix+k] = v
			}
		case from.SecretRef != nil:
			s := r.Secret(from.SecretRef.Name)
			if s == nil {
				missing = append(missing, "Secret "+from.SecretRef.Name)
				continue
			}
			for k, v := range s.Data {
				env[from.Prefix+k] = string(v)
			}
			for k, v := range s.StringData {
				env[from.Prefix+k] = v
			}
		}
	}
	for _, e := range c.Env {
		switch {
		case e.ValueFrom == nil:
			env[e.Name] = e.Value
		case e.ValueFrom.SecretKeyRef != nil:
			ref := e.ValueFrom.SecretKeyRef
			if s := r.Secret(ref.Name); s != nil && len(s.Data[ref.Key]) > 0 {
				env[e.Name] = string(s.Data[ref.Key])
			} else if s != nil && s.StringData[ref.Key] != "" {
				env[e.Name] = s.StringData[ref.Key]
			} else if ref.Optional == nil || !*ref.Optional {
				missing = append(missing, "Secret "+ref.Name+" key "+ref.Key)
			}
		case e.ValueFrom.ConfigMapKeyRef != nil:
			ref := e.ValueFrom.ConfigMapKeyRef
			if cm := r.ConfigMap(ref.Name); cm != nil {
				if v, ok := cm.Data[ref.Key]; ok {
					env[e.Name] = v
					continue
				}
			}
			if ref.Optional == nil || !*ref.Optional {
				missing = append(missing, "ConfigMap "+ref.Name+" key "+ref.Key)
			}
		default:
			env[e.Name] = "<field>"
		}
	}
	return env, missing
}
