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
# A failed test's output may be long, and CI's summary keeps only the head
# and tail of the run: its failed checks are repeated here, at the end.
if [ "$status" -ne 0 ] && [ -f Testing/Temporary/LastTestsFailed.log ]; then
  while IFS=: read -r _ name; do
    echo "what $name reported:"
    awk -v t=" Testing: $name" 'substr($0, length($0) - length(t) + 1) == t {on = 1}
                                 on && / end time:/ {on = 0} on' Testing/Temporary/LastTest.log |
      grep -E 'error: in "|fatal error|Traceback|Error:|^FAILED' | head -n 20 || true
  done <Testing/Temporary/LastTestsFailed.log
fi
echo "tests took $(took $tested); with the install and the build, $(took $began)"
exit $status
