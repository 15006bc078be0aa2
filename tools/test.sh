#!/usr/bin/env bash
# Installs what is missing, builds, and runs every test against a throwaway
# PostgreSQL that the test suite starts and stops itself.
set -euo pipefail
cd "$(dirname "$0")/.."
began=$SECONDS
took() { echo "$(( (SECONDS - $1) / 60 )) min $(( (SECONDS - $1) % 60 )) s"; }

tools/install-deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release
cmake --build build -j "$(nproc)"

# CTest stops the test server after the last test even when tests fail; this
# also stops it if the run itself is interrupted.
stop_test_server() {
  build/tests/taskmill-test-postgres stop build/test-postgres >/dev/null 2>&1 || true
}
trap stop_test_server EXIT

cd build
tested=$SECONDS
status=0
ctest --output-on-failure --timeout 900 -j 2 "$@" || status=$?
echo "tests took $(took $tested); with the install and the build, $(took $began)"
exit $status
