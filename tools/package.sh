#!/usr/bin/env bash
# Builds the Debian package of the node into build/ (taskmill_<version>_<arch>.deb):
# the binary, /etc/taskmill/taskmill.toml (a conffile) and the docs, with the
# runtime libraries it links found by dpkg-shlibdeps.
set -euo pipefail
cd "$(dirname "$0")/.."
tools/install-deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DCMAKE_INSTALL_PREFIX=/usr
cmake --build build -j "$(nproc)" --target taskmill
cd build
cpack -G DEB
