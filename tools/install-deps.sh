#!/usr/bin/env bash
# Installs the Debian 12 packages taskmill needs to build, test and run.
# Idempotent: asks apt only for what is missing.
set -euo pipefail

packages=(
  build-essential cmake pkg-config
  libcaf-dev libssl-dev
  libprotobuf-dev protobuf-compiler
  libpq-dev postgresql
  # sd_notify for the systemd unit; systemd-analyze checks the unit.
  libsystemd-dev systemd
  # Tests behind a connection pooler in transaction mode.
  pgbouncer
  libboost-dev libboost-test-dev
  nlohmann-json3-dev libspdlog-dev libcli11-dev libtomlplusplus-dev prometheus-cpp-dev
  libhowardhinnant-date-dev tzdata
  # The console's browser test and the OpenAPI check.
  python3 python3-jsonschema python3-selenium chromium chromium-driver
)

missing=()
for p in "${packages[@]}"; do
  status=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
  [[ "$status" == "install ok installed" ]] || missing+=("$p")
done
[[ ${#missing[@]} -eq 0 ]] && exit 0

sudo=()
if [[ $(id -u) -ne 0 ]]; then
  command -v sudo >/dev/null || { echo "install-deps: need root or sudo to install: ${missing[*]}" >&2; exit 1; }
  sudo=(sudo)
fi
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
"${sudo[@]}" apt-get update -qq
"${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
