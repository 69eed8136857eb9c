// Package check holds the tests that hold deploy/ to the code: kustomize renders every base and
// overlay into objects that decode strictly into their Kubernetes types, the compose file loads
// with the Compose specification's loader, the Tiltfile runs against recorded stand-ins for
// Tilt's builtins, and every service and SVC_* setting the code reads is deployed or documented.
package check
