"""A real taskmill node for the Python tests (the OpenAPI check, the console
in a browser): a scratch database on CTest's throwaway PostgreSQL, the node
binary as a child process, and both gone at the end whatever happened."""

import contextlib
import json
import os
import random
import signal
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.request


_handed_out = set()


def _free_port():
    """A loopback port free now, below the kernel's range for outgoing
    connections, so that none takes it before the node binds it."""
    with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
        outgoing_from = int(f.read().split()[0])
    for _ in range(200):
        port = random.randint(10000, max(10001, outgoing_from - 1))
        if port in _handed_out:
            continue
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
        _handed_out.add(port)
        return port
    raise RuntimeError("cannot find a free loopback port")


def _server_conninfo():
    path = os.environ.get("TASKMILL_TEST_POSTGRES")
    if not path:
        raise SystemExit("TASKMILL_TEST_POSTGRES is not set: run the tests through ctest")
    with open(path) as f:
        return f.read().strip()


def _psql(conninfo, sql):
    subprocess.run(["psql", "-X", "-q", "-v", "ON_ERROR_STOP=1", conninfo, "-c", sql],
                   check=True, stdout=subprocess.DEVNULL)


class Node:
    def __init__(self, base, token, conninfo, log):
        self.base = base
        self.token = token
        self.conninfo = conninfo
        self.log = log

    def call(self, method, path, body=None, token=True):
        """(status, parsed JSON or text) of one API call."""
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.base + path, data=data, method=method)
        if method != "GET":
            req.add_header("Content-Type", "application/json")
        if token and self.token:
            req.add_header("Authorization", "Bearer " + self.token)
        try:
            with urllib.request.urlopen(req, timeout=10) as res:
                status, raw, ctype = res.status, res.read(), res.headers.get("Content-Type", "")
        except urllib.error.HTTPError as e:
            status, raw, ctype = e.code, e.read(), e.headers.get("Content-Type", "")
        if ctype.startswith("application/json"):
            return status, json.loads(raw)
        return status, raw.decode("utf-8", "replace")

    def sql(self, statement):
        out = subprocess.run(["psql", "-X", "-q", "-t", "-A", "-v", "ON_ERROR_STOP=1",
                              self.conninfo, "-c", statement],
                             check=True, capture_output=True, text=True)
        return out.stdout.strip()


@contextlib.contextmanager
def running_node(label, token="", options=()):
    binary = os.environ.get("TASKMILL_BINARY")
    if not binary:
        raise SystemExit("TASKMILL_BINARY is not set: run the tests through ctest")
    server = _server_conninfo()
    database = "test_%s_%d" % (label, os.getpid())
    _psql(server, 'DROP DATABASE IF EXISTS "%s"' % database)
    _psql(server, 'CREATE DATABASE "%s"' % database)
    conninfo = server.replace("dbname=postgres", "dbname=" + database)
    port = _free_port()
    log = tempfile.NamedTemporaryFile(prefix="taskmill-%s-" % label, suffix=".log", delete=False)
    args = [binary, "node", "--database", conninfo,
            "--set", "node.name=" + label,
            "--set", "api.listen=127.0.0.1:%d" % port,
            "--set", "cluster.listen=127.0.0.1:0",
            "--set", "api.token=" + token]
    for option in options:
        args += ["--set", option]
    proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT)
    node = Node("http://127.0.0.1:%d" % port, token, conninfo, log.name)
    try:
        deadline = time.monotonic() + 60
        while True:
            if proc.poll() is not None:
                raise RuntimeError("the node exited with %s; its log: %s" % (proc.returncode, log.name))
            try:
                if node.call("GET", "/readyz", token=False)[0] == 200:
                    break
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError("the node was not ready within 60 s; its log: " + log.name)
            time.sleep(0.1)
        yield node
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        with contextlib.suppress(subprocess.CalledProcessError):
            _psql(server, 'DROP DATABASE IF EXISTS "%s" WITH (FORCE)' % database)
