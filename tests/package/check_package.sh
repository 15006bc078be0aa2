#!/usr/bin/env bash
# The Debian package (tools/package.sh): built by cpack from the build tree;
# its control data (the libraries dpkg-shlibdeps found, the conffile, the
# user its postinst makes); its systemd unit (systemd-analyze verify and
# security); its files unpacked into a throwaway root, whose
# binary answers --version and runs a node from the packaged config against
# the test PostgreSQL. As root, on a machine without taskmill installed, it
# is also installed with dpkg (the user is made) and purged.
set -euo pipefail
build=$1
server=$(cat "$TASKMILL_TEST_POSTGRES")
work=$(mktemp -d /tmp/taskmill-package-XXXXXX)
node_pid=
listener_pid=
database=test_package_$$
cleanup() {
  [ -n "$node_pid" ] && kill "$node_pid" 2>/dev/null && wait "$node_pid" 2>/dev/null
  [ -n "$listener_pid" ] && kill "$listener_pid" 2>/dev/null || true
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
unit=usr/lib/systemd/system/taskmill.service
for f in usr/bin/taskmill etc/taskmill/taskmill.toml usr/share/doc/taskmill/README.md \
         usr/share/doc/taskmill/docs/configuration.md $unit; do
  [ -f "$root/$f" ] || fail "no /$f in the package"
done

# The unit as systemd reads it (its binary where the package unpacked it),
# and its exposure as systemd rates it (0 best, 10 worst; 3.5 is "OK").
sed "s#/usr/bin/taskmill#$root/usr/bin/taskmill#" "$root/$unit" >"$work/taskmill.service"
verify=$(systemd-analyze verify "$work/taskmill.service" 2>&1) || fail "systemd-analyze verify: $verify"
[ -z "$verify" ] || fail "systemd-analyze verify: $verify"
for setting in Type=notify WatchdogSec= Restart=on-failure KillMode=mixed ProtectSystem=strict \
               NoNewPrivileges=yes PrivateTmp=yes StateDirectory=taskmill; do
  grep -q "^$setting" "$work/taskmill.service" || fail "the unit lacks $setting"
done
exposure=$(systemd-analyze security --offline=true "$work/taskmill.service" 2>&1 |
  sed -n 's/.*Overall exposure level for taskmill.service: \([0-9.]*\).*/\1/p')
[ -n "$exposure" ] || fail "systemd-analyze security said no exposure level"
awk -v e="$exposure" 'BEGIN { exit !(e <= 2.0) }' || fail "exposure $exposure (above 2.0)"
pass "the unit passes systemd-analyze verify; exposure $exposure (systemd-analyze security)"
for script in postinst prerm postrm; do
  dpkg-deb -I "$deb" $script | grep -q "systemctl" || fail "$script does not tell systemd"
done
version=$("$root/usr/bin/taskmill" --version)
[[ $version =~ ^taskmill\ [0-9]+\.[0-9]+\.[0-9]+$ ]] || fail "--version said: $version"
pass "the packaged binary says: $version"

psql -X -q "$server" -c "CREATE DATABASE $database" >/dev/null
checked=$("$root/usr/bin/taskmill" node --check-config --config "$root/etc/taskmill/taskmill.toml" \
  --database "${server/dbname=postgres/dbname=$database}") || fail "--check-config: $checked"
grep -q ": OK (node " <<<"$checked" || fail "--check-config said: $checked"
pass "the packaged config passes --check-config against the test PostgreSQL"
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
# What systemd would hear from it (sd_notify's datagrams), one a line.
python3 -c '
import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind(sys.argv[1])
with open(sys.argv[2], "a") as out:
    while True:
        out.write(s.recv(4096).decode().replace("\n", " ") + "\n")
        out.flush()
' "$work/notify.sock" "$work/notify.log" &
listener_pid=$!
for _ in $(seq 50); do [ -S "$work/notify.sock" ] && break; sleep 0.1; done
NOTIFY_SOCKET=$work/notify.sock WATCHDOG_USEC=2000000 \
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
for _ in $(seq 50); do grep -q "WATCHDOG=1" "$work/notify.log" && break; sleep 0.1; done
grep -q "^READY=1" "$work/notify.log" || fail "no READY=1: $(cat "$work/notify.log")"
grep -q "^WATCHDOG=1" "$work/notify.log" || fail "no WATCHDOG=1: $(cat "$work/notify.log")"
kill -TERM "$node_pid"
wait "$node_pid" || fail "the node did not stop cleanly: $(tail -5 "$work/node.log")"
node_pid=
grep -q "^STOPPING=1" "$work/notify.log" || fail "no STOPPING=1: $(cat "$work/notify.log")"
kill "$listener_pid"
listener_pid=
pass "it told the notify socket READY=1, WATCHDOG=1 and STOPPING=1 ($(wc -l <"$work/notify.log") datagrams)"

if [ "$(id -u)" = 0 ] && ! dpkg -s taskmill >/dev/null 2>&1; then
  dpkg -i "$deb" >"$work/dpkg.log" 2>&1 || { cat "$work/dpkg.log"; fail "dpkg -i"; }
  installed=$(/usr/bin/taskmill --version)
  verify=$(systemd-analyze verify /$unit 2>&1) || { dpkg --purge taskmill >/dev/null; fail "verify: $verify"; }
  getent passwd taskmill >/dev/null || { dpkg --purge taskmill >/dev/null; fail "no user taskmill"; }
  dpkg --purge taskmill >"$work/dpkg.log" 2>&1 || { cat "$work/dpkg.log"; fail "dpkg --purge"; }
  [ ! -e /usr/bin/taskmill ] && [ ! -e /etc/taskmill/taskmill.toml ] || fail "purge left files"
  pass "installed with dpkg ($installed, user taskmill made) and purged"
else
  echo "NOTE: not installed with dpkg (not root, or taskmill is installed here)"
fi
