#!/usr/bin/env bash
# The one-GPU check under the name a GPU session is told to run first; the script itself and its
# summary live in bench/gpu/ (docs/gpu.md). Same arguments: [--cpu] [OUT_DIR].
exec bash "$(dirname "$0")/gpu/check.sh" "$@"
