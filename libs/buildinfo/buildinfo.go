// Package buildinfo holds the version label stamped into every binary at build time.
package buildinfo

// version is set by the linker: -ldflags "-X svc.dev/libs/buildinfo.version=v1.2.3".
// It is the one package-level variable the build needs; nothing writes it at run time.
var version = "dev" //nolint:gochecknoglobals // written only by the linker

// Version returns the label the binary was built with, "dev" when none was stamped.
func Version() string { return version }
