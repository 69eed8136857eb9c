#!/usr/bin/env bash
# Lints the .proto files and regenerates the Go code under proto/gen/.
#
# buf and both protoc plugins are pinned in tools.mod and run through `go tool`, so nothing needs
# installing: the first run builds them (a minute or two), later runs use the Go build cache.
# GOWORK=off because the tools have their own modfile, which go.work mode would ignore; it is
# exported so buf's plugin subprocesses inherit it. Works from any directory.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")"
export GOWORK=off

buf() { go tool -modfile=tools.mod buf "$@"; }

buf lint
buf generate "$@"
