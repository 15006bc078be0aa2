#!/usr/bin/env bash
# Installs what is missing, builds, and runs a node on the embedded PostgreSQL
# with a demo of tasks flowing through it (tools/demo.sh). Ctrl-C stops it.
set -euo pipefail
cd "$(dirname "$0")/.."

tools/install-deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release
cmake --build build -j "$(nproc)" --target taskmill

exec tools/demo.sh "$@"
