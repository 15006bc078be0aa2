#!/usr/bin/env bash
# The Debian package (tools/package.sh): built by cpack from the build tree;
# its control data (the libraries dpkg-shlibdeps found, the conffile, the
# user its postinst makes); its files unpacked into a throwaway root, whose
# binary answers --version and runs a node from the packaged config against
# the test PostgreSQL. As root, on a machine without taskmill installed, it
# is also installed with dpkg (the user is made) and purged.
set -euo pipefail
build=$1
server=$(cat "$TASKMILL_TEST_POSTGRES")
work=$(mktemp -d /tmp/taskmill-package-XXXXXX)
node_pid=
database=test_package_$$
cleanup() {
  [ -n "$node_pid" ] && kill "$node_pid" 2>/dev/null && wait "$node_pid" 2>/dev/null
  psql -X -q "$server" -c "DROP DATABASE IF EXISTS $database" >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT
fail() { echo "FAIL: $*"; exit 1; }
pass() { echo "PASS: $*"; }

cd "$build"
rm -f taskmill_*.deb
cpack -G DEB >"$work/cpack.log" 2>&1 || { cat "$work/cpack.log"; fail "cpack"; }
deb=$(ls "$build"/taskmill_*.deb)
pass "built $(basename "$deb")"

depends=$(dpkg-deb -f "$deb" Depends)
for lib in libpq5 libcaf-core0.17 libcaf-io0.17 libcaf-openssl0.17 libprotobuf32 libssl3 adduser; do
  grep -q "$lib" <<<"$depends" || fail "Depends lacks $lib: $depends"
done
pass "depends on the libraries it links: $depends"
[ "$(dpkg-deb -I "$deb" conffiles)" = /etc/taskmill/taskmill.toml ] ||
  fail "conffiles: $(dpkg-deb -I "$deb" conffiles)"
pass "/etc/taskmill/taskmill.toml is a conffile"
dpkg-deb -I "$deb" postinst | grep -q "adduser --system" || fail "postinst makes no user"

root=$work/root
dpkg-deb -x "$deb" "$root"
for f in usr/bin/taskmill etc/taskmill/taskmill.toml usr/share/doc/taskmill/README.md \
         usr/share/doc/taskmill/docs/configuration.md; do
  [ -f "$root/$f" ] || fail "no /$f in the package"
done
version=$("$root/usr/bin/taskmill" --version)
[[ $version =~ ^taskmill\ [0-9]+\.[0-9]+\.[0-9]+$ ]] || fail "--version said: $version"
pass "the packaged binary says: $version"

psql -X -q "$server" -c "CREATE DATABASE $database" >/dev/null
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
"$root/usr/bin/taskmill" node --config "$root/etc/taskmill/taskmill.toml" \
  --database "${server/dbname=postgres/dbname=$database}" --set node.name=packaged \
  --set api.listen="127.0.0.1:$port" --set cluster.listen=127.0.0.1:0 \
  --set node.data_dir="$work/data" >"$work/node.log" 2>&1 &
node_pid=$!
for _ in $(seq 150); do
  curl -sf "http://127.0.0.1:$port/readyz" >/dev/null && break
  sleep 0.2
done
curl -sf "http://127.0.0.1:$port/readyz" >/dev/null || { cat "$work/node.log"; fail "no /readyz"; }
curl -sf "http://127.0.0.1:$port/v1/stats" | grep -q '"counts"' || fail "no /v1/stats"
pass "a node runs from the packaged binary and config"
kill -INT "$node_pid"
wait "$node_pid" || fail "the node did not stop cleanly: $(tail -5 "$work/node.log")"
node_pid=

if [ "$(id -u)" = 0 ] && ! dpkg -s taskmill >/dev/null 2>&1; then
  dpkg -i "$deb" >"$work/dpkg.log" 2>&1 || { cat "$work/dpkg.log"; fail "dpkg -i"; }
  installed=$(/usr/bin/taskmill --version)
  getent passwd taskmill >/dev/null || { dpkg --purge taskmill >/dev/null; fail "no user taskmill"; }
  dpkg --purge taskmill >"$work/dpkg.log" 2>&1 || { cat "$work/dpkg.log"; fail "dpkg --purge"; }
  [ ! -e /usr/bin/taskmill ] && [ ! -e /etc/taskmill/taskmill.toml ] || fail "purge left files"
  pass "installed with dpkg ($installed, user taskmill made) and purged"
else
  echo "NOTE: not installed with dpkg (not root, or taskmill is installed here)"
fi
