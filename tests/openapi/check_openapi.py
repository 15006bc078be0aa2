#!/usr/bin/env python3
"""Checks a running taskmill node against messages/openapi.json (SPEC §8).

    check_openapi.py --base-url http://127.0.0.1:PORT --token TOKEN --doc messages/openapi.json

The node must run tasks of type NOOP with the `noop` executor and of type SLOW
with the `sleep` executor (overrides `types.NOOP.executor=noop`,
`types.SLOW.executor=sleep`), and have api.token set to TOKEN (without
--token the 401 checks are skipped). The script

* checks the document itself (OpenAPI 3.1.0, schemas valid under JSON Schema
  2020-12, every $ref resolves) and that GET /v1/openapi.json serves the same
  document;
* sets up its own data through the API (tasks, a batch, a task far in the
  future, a task that goes dead, one waiting out a backoff, jobs with a
  per-second and an @every schedule, manual firings);
* calls every endpoint with success and error cases (400, 401, 404, 405 with
  Allow, 409, 413, 414, 431) and checks that each answer's status is documented
  for the operation, that its content type is documented for that status, and
  that its body validates against the documented schema; requests that were
  accepted must validate against the documented request schema too;
* fails when a documented operation never answered 2xx (the document must not
  list endpoints that do not exist), and when a 405's Allow header differs
  from the methods documented for the path.

One line per check; the last line is `N passed, M failed`; exit status 1 when
any check failed. Python 3 standard library (urllib) and python3-jsonschema
(4.10 or newer) only.
"""

import argparse
import datetime
import http.client
import json
import os
import re
import sys
import time
import urllib.error
import urllib.parse
import urllib.request

try:
    import jsonschema
except ImportError:  # pragma: no cover
    print("check_openapi.py needs python3-jsonschema (Draft 2020-12 support, 4.10 or newer)")
    print("0 passed, 1 failed")
    sys.exit(1)

METHODS = ("get", "put", "post", "delete", "options", "head", "patch", "trace")


# -- small helpers ------------------------------------------------------------------------


RFC3339 = re.compile(
    r"^(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$")


def parse_rfc3339(text):
    """The time as an aware datetime; ValueError when it is not RFC 3339."""
    m = RFC3339.match(text)
    if not m:
        raise ValueError("not an RFC 3339 date-time: %r" % text)
    fraction = (m.group(7) or ".0")[1:7].ljust(6, "0")
    zone = m.group(8)
    tz = datetime.timezone.utc
    if zone not in ("Z", "z"):
        sign = 1 if zone[0] == "+" else -1
        tz = datetime.timezone(sign * datetime.timedelta(hours=int(zone[1:3]),
                                                         minutes=int(zone[4:6])))
    return datetime.datetime(int(m.group(1)), int(m.group(2)), int(m.group(3)), int(m.group(4)),
                             int(m.group(5)), min(int(m.group(6)), 59), int(fraction), tz)


FORMATS = jsonschema.FormatChecker(formats=())


@FORMATS.checks("date-time", raises=ValueError)
def _is_date_time(value):
    if isinstance(value, str):
        parse_rfc3339(value)
    return True


def rfc3339(dt):
    return dt.astimezone(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def varint(data, i):
    shift = value = 0
    while True:
        if i >= len(data) or shift > 63:
            raise ValueError("truncated varint")
        b = data[i]
        i += 1
        value |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            return value, i


def encode_varint(n):
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def pb_len_field(field, payload):
    if isinstance(payload, str):
        payload = payload.encode()
    return encode_varint(field << 3 | 2) + encode_varint(len(payload)) + payload


def pb_fields(data):
    """The (field, wire type, value) of a protobuf message; ValueError when malformed."""
    i, out = 0, []
    while i < len(data):
        key, i = varint(data, i)
        field, wire = key >> 3, key & 7
        if field == 0:
            raise ValueError("field number 0")
        if wire == 0:
            value, i = varint(data, i)
        elif wire == 1:
            value, i = data[i:i + 8], i + 8
        elif wire == 2:
            n, i = varint(data, i)
            value, i = data[i:i + n], i + n
        elif wire == 5:
            value, i = data[i:i + 4], i + 4
        else:
            raise ValueError("wire type %d" % wire)
        if i > len(data):
            raise ValueError("truncated field %d" % field)
        out.append((field, wire, value))
    return out


def first_difference(a, b, where="$"):
    """Where two JSON values first differ, or None."""
    if type(a) is not type(b):
        return where + ": %s vs %s" % (type(a).__name__, type(b).__name__)
    if isinstance(a, dict):
        for k in sorted(set(a) | set(b)):
            if k not in a:
                return where + "." + k + ": only in the served document"
            if k not in b:
                return where + "." + k + ": only in the repository's document"
            diff = first_difference(a[k], b[k], where + "." + k)
            if diff:
                return diff
        return None
    if isinstance(a, list):
        if len(a) != len(b):
            return where + ": %d vs %d items" % (len(a), len(b))
        for i, (x, y) in enumerate(zip(a, b)):
            diff = first_difference(x, y, "%s[%d]" % (where, i))
            if diff:
                return diff
        return None
    return None if a == b else where + ": %r vs %r" % (a, b)


def short(text, n=300):
    text = text if isinstance(text, str) else repr(text)
    return text if len(text) <= n else text[:n] + "..."


class Answer:
    def __init__(self, status, headers, body, error=None):
        self.status = status
        self.error = error  # no answer at all: why
        self.headers = {k.lower(): v for k, v in headers.items()} if headers else {}
        self.body = body or b""
        self.content_type = self.headers.get("content-type", "").split(";")[0].strip().lower()
        self._json = None

    @property
    def json(self):
        if self._json is None and self.content_type == "application/json" and self.body:
            try:
                self._json = json.loads(self.body.decode("utf-8"))
            except ValueError:
                self._json = None
        return self._json

    def get(self, *keys, default=None):
        value = self.json
        for k in keys:
            try:
                value = value[k]
            except (KeyError, IndexError, TypeError):
                return default
        return value


# -- the checker --------------------------------------------------------------------------


class Checker:
    def __init__(self, args, doc):
        self.base = args.base_url.rstrip("/")
        self.token = args.token
        self.doc = doc
        self.args = args
        self.passed = 0
        self.failed = 0
        self.exercised = set()  # (METHOD, template) answered 2xx
        self.validators = {}
        # Straight to the node, whatever http_proxy says.
        self.opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))

    # -- reporting

    def check(self, ok, label, problems=()):
        if ok:
            self.passed += 1
            print("PASS " + label, flush=True)
        else:
            self.failed += 1
            print("FAIL " + label + (": " + "; ".join(problems) if problems else ""), flush=True)
        return ok

    def info(self, text):
        print("INFO " + text, flush=True)

    # -- HTTP

    def http(self, method, path, body=None, *, query=None, headers=None, token=True,
             raw=None, content_type=None):
        url = self.base + path
        if query:
            url += "?" + (query if isinstance(query, str) else urllib.parse.urlencode(query))
        data = None
        all_headers = {}
        if raw is not None:
            data = raw
        elif body is not None:
            data = json.dumps(body).encode("utf-8") if not isinstance(body, (bytes, str)) \
                else (body.encode("utf-8") if isinstance(body, str) else body)
        if data is not None or content_type or method not in ("GET", "HEAD"):
            all_headers["Content-Type"] = content_type or "application/json"
        if token is True and self.token:
            all_headers["Authorization"] = "Bearer " + self.token
        elif isinstance(token, str):
            all_headers["Authorization"] = token
        all_headers.update(headers or {})
        req = urllib.request.Request(url, data=data, method=method, headers=all_headers)
        try:
            with self.opener.open(req, timeout=self.args.http_timeout) as res:
                return Answer(res.status, dict(res.headers), res.read())
        except urllib.error.HTTPError as e:
            try:
                payload = e.read()
            except (OSError, http.client.HTTPException):  # closed right after a refusal
                payload = b""
            return Answer(e.code, dict(e.headers or {}), payload)
        except (urllib.error.URLError, OSError, http.client.HTTPException) as e:
            return Answer(0, {}, b"", error="%s: %s" % (type(e).__name__, e))

    # -- the document

    def resolve(self, node):
        while isinstance(node, dict) and "$ref" in node and node["$ref"].startswith("#/"):
            target = self.doc
            for part in node["$ref"][2:].split("/"):
                target = target[part.replace("~1", "/").replace("~0", "~")]
            node = target
        return node

    def validator(self, schema):
        key = json.dumps(schema, sort_keys=True)
        v = self.validators.get(key)
        if v is None:
            root = dict(schema)
            root["components"] = self.doc.get("components", {})
            v = jsonschema.Draft202012Validator(root, format_checker=FORMATS)
            self.validators[key] = v
        return v

    def schema_problems(self, schema, value, what):
        errors = sorted(self.validator(schema).iter_errors(value), key=lambda e: list(e.path))
        out = []
        for e in errors[:3]:
            # In a oneOf/anyOf, the branch that came closest says more than "not valid
            # under any of the given schemas".
            while e.context:
                e = max(e.context, key=lambda x: len(list(x.absolute_path)))
            where = "/".join(str(p) for p in e.absolute_path) or "(root)"
            message = e.message
            if e.validator == "not":  # the message would be the whole instance
                message = "must not match %s" % json.dumps(e.validator_value)
            out.append("%s %s: %s" % (what, where, short(message, 200)))
        if len(errors) > 3:
            out.append("%d more schema errors" % (len(errors) - 3))
        return out

    def operation(self, method, template):
        item = self.doc["paths"].get(template)
        if item is None:
            return None, None
        return item, item.get(method.lower())

    def documented_methods(self, template):
        item = self.doc["paths"][template]
        methods = {m.upper() for m in item if m in METHODS}
        if "GET" in methods:
            methods.add("HEAD")
        return methods

    def conformance(self, method, template, ans, query=None, request=None):
        """What about this answer the document does not allow."""
        if ans.error:
            return ["no answer: " + ans.error]
        problems = []
        item, op = self.operation("GET" if method == "HEAD" else method, template)
        if item is None:
            return ["path %s is not documented" % template]
        if op is None:
            if ans.status != 405:
                return ["%s %s is not documented, yet answered %d" % (method, template,
                                                                     ans.status)]
            ops = [o for m, o in item.items() if m in METHODS and "405" in o.get("responses", {})]
            if not ops:
                return ["no operation of %s documents 405" % template]
            op = ops[0]
        responses = op.get("responses", {})
        resp = responses.get(str(ans.status)) or responses.get("%dXX" % (ans.status // 100)) \
            or responses.get("default")
        if resp is None:
            return ["status %d is not documented for %s %s (documented: %s)" % (
                ans.status, method, template, ", ".join(sorted(responses)))]
        resp = self.resolve(resp)
        for name, header in (resp.get("headers") or {}).items():
            header = self.resolve(header)
            if header.get("required") and name.lower() not in ans.headers:
                problems.append("header %s is missing" % name)
        if ans.status == 405:
            allow = {m.strip().upper() for m in ans.headers.get("allow", "").split(",") if m.strip()}
            documented = self.documented_methods(template)
            if allow != documented:
                problems.append("Allow: %s, but the document has %s" % (
                    ", ".join(sorted(allow)) or "(none)", ", ".join(sorted(documented))))
        content = resp.get("content") or {}
        if method == "HEAD":
            if ans.body:
                problems.append("HEAD answer has a body")
            return problems
        if not content:
            if ans.body:
                problems.append("documented without content, answered %d bytes" % len(ans.body))
            return problems
        media = content.get(ans.content_type)
        if media is None:
            return problems + ["content type %r is not documented for %d (documented: %s)" % (
                ans.content_type, ans.status, ", ".join(content))]
        schema = media.get("schema")
        if ans.content_type == "application/json":
            try:
                value = json.loads(ans.body.decode("utf-8"))
            except ValueError as e:
                return problems + ["body is not JSON: %s" % e]
            if schema is not None:
                problems += self.schema_problems(schema, value, "body")
        elif ans.content_type == "application/x-protobuf":
            try:
                fields = pb_fields(ans.body)
            except ValueError as e:
                return problems + ["body is not a protobuf message: %s" % e]
            if media.get("x-protobuf-message") == "taskmill.pb.Error":
                error = {"code": "", "message": ""}
                for field, wire, value in fields:
                    if field in (1, 2) and wire == 2:
                        error["code" if field == 1 else "message"] = value.decode("utf-8",
                                                                                  "replace")
                json_schema = (content.get("application/json") or {}).get("schema")
                if json_schema is not None:
                    problems += self.schema_problems(json_schema, {"error": error},
                                                     "protobuf Error")
        elif ans.content_type.startswith("text/"):
            try:
                ans.body.decode("utf-8")
            except UnicodeDecodeError:
                problems.append("text body is not UTF-8")
        if 200 <= ans.status < 300:
            params = {p["name"] for p in (self.resolve(p) for p in
                                          item.get("parameters", []) + op.get("parameters", []))
                      if p.get("in") == "query"}
            for name in (query or {}):
                if name not in params:
                    problems.append("query parameter %s is not documented" % name)
            if request is not None and "requestBody" in op:
                rb = self.resolve(op["requestBody"])
                rschema = ((rb.get("content") or {}).get("application/json") or {}).get("schema")
                if rschema is not None:
                    problems += self.schema_problems(rschema, request,
                                                     "accepted request does not match the "
                                                     "documented request schema:")
        return problems

    def fill(self, template, params):
        path = template
        for name, value in (params or {}).items():
            path = path.replace("{" + name + "}", urllib.parse.quote(str(value), safe=""))
        return path

    def call(self, label, method, template, params=None, *, expect=None, body=None, query=None,
             headers=None, token=True, raw=None, content_type=None, path=None):
        """Calls and checks one answer; `expect`: the status (or statuses) it must have."""
        ans = self.http(method, path or self.fill(template, params), body, query=query,
                        headers=headers, token=token, raw=raw, content_type=content_type)
        problems = []
        if expect is not None and not ans.error:
            allowed = expect if isinstance(expect, (set, tuple, list, range)) else (expect,)
            if ans.status not in allowed:
                problems.append("expected %s, got %d %s" % (
                    "2xx" if isinstance(allowed, range) else "/".join(map(str, allowed)),
                    ans.status, short(ans.body.decode(
                        "utf-8", "replace"), 300)))
        request = body if raw is None and not isinstance(body, (bytes, str)) else None
        if isinstance(body, str) and raw is None:
            try:
                request = json.loads(body)
            except ValueError:
                request = None
        query_dict = query if isinstance(query, dict) else (
            dict(urllib.parse.parse_qsl(query, keep_blank_values=True)) if query else None)
        problems += self.conformance(method, template, ans, query_dict, request)
        if 200 <= ans.status < 300 and method != "HEAD":
            self.exercised.add((method, template))
        self.check(not problems, " ".join(x for x in (method, template, label) if x) + " -> " +
                   (str(ans.status) if not ans.error else "no answer"), problems)
        return ans

    # -- waiting

    def wait_task(self, task_id, statuses, timeout=None):
        if not isinstance(task_id, int):
            self.check(False, "task reaches %s" % "/".join(statuses), ["no task id to wait for"])
            return None
        deadline = time.time() + (timeout or self.args.wait)
        ans = None
        while time.time() < deadline:
            ans = self.http("GET", "/v1/tasks/%d" % task_id)
            if ans.status == 200 and ans.get("status") in statuses:
                return ans.json
            time.sleep(0.2)
        got = ans.get("status") if ans else None
        self.check(False, "task %d reaches %s" % (task_id, "/".join(statuses)),
                   ["still %s after %ss" % (got, timeout or self.args.wait)])
        return ans.json if ans else None


# -- the checks ---------------------------------------------------------------------------


def check_document(c, doc):
    c.check(doc.get("openapi") == "3.1.0", "document: openapi is 3.1.0",
            ["openapi is %r" % doc.get("openapi")])
    problems = []
    for name, schema in doc.get("components", {}).get("schemas", {}).items():
        try:
            jsonschema.Draft202012Validator.check_schema(schema)
        except jsonschema.exceptions.SchemaError as e:
            problems.append("%s: %s" % (name, short(e.message, 200)))
    c.check(not problems, "document: component schemas are valid JSON Schema 2020-12", problems)

    refs = []

    def walk(node):
        if isinstance(node, dict):
            for k, v in node.items():
                if k == "$ref" and isinstance(v, str):
                    refs.append(v)
                else:
                    walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)

    walk(doc)
    bad = []
    for ref in sorted(set(refs)):
        try:
            if not ref.startswith("#/"):
                raise KeyError(ref)
            c.resolve({"$ref": ref})
        except (KeyError, TypeError):
            bad.append(ref)
    c.check(not bad, "document: every $ref resolves (%d)" % len(set(refs)), bad)

    ids, dupes, missing = set(), [], []
    for template, item in doc.get("paths", {}).items():
        for method, op in item.items():
            if method not in METHODS:
                continue
            oid = op.get("operationId")
            if not oid:
                missing.append("%s %s" % (method.upper(), template))
            elif oid in ids:
                dupes.append(oid)
            ids.add(oid)
            public = op.get("security", doc.get("security")) == []
            if not public and "401" not in op.get("responses", {}):
                missing.append("%s %s documents no 401" % (method.upper(), template))
    c.check(not dupes and not missing, "document: unique operationIds, 401 on secured operations",
            dupes + missing)
    try:
        from openapi_spec_validator import validate as validate_spec
    except ImportError:
        c.info("openapi-spec-validator is not installed: the document is not checked against "
               "the OpenAPI 3.1 meta-schema")
    else:
        try:
            validate_spec(doc)
            c.check(True, "document: valid OpenAPI 3.1 (openapi-spec-validator)")
        except Exception as e:  # its error types differ between versions
            c.check(False, "document: valid OpenAPI 3.1 (openapi-spec-validator)",
                    [short(str(e), 400)])


def wait_ready(c):
    deadline = time.time() + c.args.ready_timeout
    last = None
    while time.time() < deadline:
        last = c.http("GET", "/readyz", token=False)
        if last.status == 200:
            return True
        time.sleep(0.5)
    c.check(False, "the node is ready", ["GET /readyz: %s" % (
        last.error or "%d %s" % (last.status, short(last.body.decode("utf-8", "replace"))))])
    return False


def check_probes_and_document(c, doc):
    c.call("(no token)", "GET", "/healthz", expect=200, token=False)
    c.call("(no token)", "HEAD", "/healthz", expect=200, token=False)
    c.call("(no token)", "GET", "/readyz", expect=200, token=False)
    ans = c.call("(no token)", "GET", "/metrics", expect=200, token=False)
    c.check(b"taskmill_" in ans.body, "GET /metrics has taskmill_ metrics")
    ans = c.call("", "GET", "/v1/openapi.json", expect=200)
    if ans.status == 200:
        served = ans.json
        diff = first_difference(served, doc) if served is not None else "not JSON"
        c.check(diff is None, "GET /v1/openapi.json serves the repository's document",
                [diff] if diff else [])


def check_auth(c):
    if not c.token:
        c.info("no --token: the 401 checks are skipped")
        return
    for template, item in c.doc["paths"].items():
        for method, op in item.items():
            if method not in METHODS:
                continue
            path = c.fill(template, {"id": 1, "batch": "oa-none", "name": "oa-none"})
            public = op.get("security", c.doc.get("security")) == []
            body = None if method in ("get", "delete") else "{}"
            if public:
                c.call("(no token, documented as public)", method.upper(), template, path=path,
                       expect=range(200, 300), token=False)
                continue
            c.call("(no token)", method.upper(), template, path=path, expect=401, body=body,
                   token=False)
    c.call("(wrong token)", "GET", "/v1/stats", expect=401, token="Bearer not-" + c.token)
    c.call("(lower-case scheme)", "GET", "/v1/stats", expect=200, token="bearer " + c.token)


def check_methods(c):
    """405 with an Allow header that matches the document, for every path."""
    for template in c.doc["paths"]:
        documented = c.documented_methods(template)
        method = next(m for m in ("PATCH", "DELETE", "PUT", "POST") if m not in documented)
        path = c.fill(template, {"id": 1, "batch": "oa-none", "name": "oa-none"})
        c.call("(wrong method)", method, template, path=path, expect=405,
               body="{}" if method != "DELETE" else None)
    ans = c.http("GET", "/v1/no-such-endpoint")
    problems = [] if ans.status == 404 else ["got %d" % ans.status]
    if ans.json is not None:
        problems += c.schema_problems({"$ref": "#/components/schemas/Error"}, ans.json, "body")
    else:
        problems.append("body is not JSON")
    c.check(not problems, "GET /v1/no-such-endpoint -> 404 with an Error body", problems)


def check_tasks(c, run, st):
    noop, slow = c.args.noop_type, c.args.slow_type
    batch = "oa-batch-" + run
    T, TID = "/v1/tasks", "/v1/tasks/{id}"

    # -- submits
    ans = c.call("(one task)", "POST", T, expect=200, body={
        "type": noop, "key": "noop-1-" + run, "payload": {"hello": "world", "n": [1, 2]},
        "priority": "2", "trace_id": "0af7651916cd43dd8448eb211c80319c"})
    c.check(ans.get("outcome") == "created", "submit: outcome created",
            ["outcome %r" % ans.get("outcome")])
    st["noop1"] = ans.get("task", "id")
    c.call("(the same again)", "POST", T, expect=200, body={
        "type": noop, "key": "noop-1-" + run, "payload": {"hello": "world", "n": [1, 2]}})

    slow_payload = {"ms": 120000}
    ans = c.call("(batch)", "POST", T, expect=200, body={"tasks": [
        {"type": noop, "key": "b-1-" + run, "batch": batch, "version": "3"},
        {"type": noop, "key": "b-2-" + run, "batch": batch, "execute_at": rfc3339(
            datetime.datetime.now(datetime.timezone.utc))},
        {"type": slow, "key": "slow-dead-" + run, "batch": batch, "payload": slow_payload,
         "timeout_ms": 300000, "max_retries": 0,
         "backoff": {"kind": "exponential", "base_ms": 100, "cap_ms": 1000, "jitter": 0.5}},
    ]})
    keys = [r.get("task", {}).get("key") for r in ans.get("results", default=[])]
    c.check(keys == ["b-1-" + run, "b-2-" + run, "slow-dead-" + run],
            "batch submit: answered in request order", ["keys %r" % keys])
    st["slow_dead"] = ans.get("results", 2, "task", "id")
    st["batch"] = batch

    ans = c.call("(far in the future)", "POST", T, expect=200, body={
        "type": noop, "key": "far-" + run, "execute_at": "2099-01-01T00:00:00Z"})
    st["far"] = ans.get("task", "id")
    ans = c.call("(pending, due later)", "GET", TID, {"id": st["far"]}, expect=200)
    waiting = ans.get("waiting") or {}
    c.check(waiting.get("reason") == "due_later" and waiting.get("until") == ans.get("execute_at"),
            "a task due later is waiting: due_later until its execute_at",
            ["waiting %r" % ans.get("waiting")])

    ans = c.call("(slow, long backoff)", "POST", T, expect=200, body={
        "type": slow, "key": "slow-backoff-" + run, "payload": slow_payload,
        "timeout_ms": 300000, "max_retries": 3,
        "backoff": {"kind": "fixed", "base_ms": 600000, "cap_ms": 600000, "jitter": 0}})
    st["slow_backoff"] = ans.get("task", "id")

    unrun = "OA_UNRUN_" + run.replace("-", "_")
    ans = c.call("(a type no node runs)", "POST", T, expect=200, body={
        "type": unrun, "key": "u-1"})
    st["unrun"] = (unrun, "u-1")
    ans = c.call("(no node runs its type)", "GET", TID, {"id": ans.get("task", "id")},
                 expect=200)
    st["unrun_pending"] = ans.get("status") == "pending"
    if st["unrun_pending"] or ans.get("waiting"):
        c.check(ans.get("waiting", "reason") == "no_node_for_type",
                "a task of a type no node runs is waiting: no_node_for_type",
                ["waiting %r" % ans.get("waiting")])
    else:
        c.info("the node ran a task of type %s: a default executor runs every type, so "
               "no_node_for_type is not checked" % unrun)

    # -- protobuf
    task = pb_len_field(1, noop) + pb_len_field(2, "pb-1-" + run)
    ans = c.call("(protobuf in, JSON out)", "POST", T, expect=200, raw=pb_len_field(1, task),
                 content_type="application/x-protobuf", headers={"Accept": "application/json"})
    c.check(isinstance(ans.get("results"), list), "protobuf submit answered in JSON is {results}")
    task = pb_len_field(1, noop) + pb_len_field(2, "pb-2-" + run)
    ans = c.call("(protobuf in and out)", "POST", T, expect=200, raw=pb_len_field(1, task),
                 content_type="application/x-protobuf")
    c.check(ans.content_type == "application/x-protobuf", "protobuf submit answered in protobuf",
            ["content type %r" % ans.content_type])
    c.call("(Accept protobuf)", "GET", "/v1/stats", expect=200,
           headers={"Accept": "application/x-protobuf"})

    # -- bad submits
    c.call("(not JSON)", "POST", T, expect=400, body='{"type": "NOOP", "key": ')
    c.call("(unknown field)", "POST", T, expect=400, body={"type": noop, "key": "x", "prio": 1})
    c.call("(priority 9)", "POST", T, expect=400, body={"type": noop, "key": "x", "priority": 9})
    c.call("(empty batch)", "POST", T, expect=400, body={"tasks": []})
    c.call("(priority not an integer)", "POST", T, expect=400,
           body={"type": noop, "key": "x", "priority": "high"})
    c.call("(bad protobuf)", "POST", T, expect=400, raw=b"\xff\xff\xff",
           content_type="application/x-protobuf")
    big = "x" * (c.args.max_payload_bytes + 100)
    c.call("(payload over the limit)", "POST", T, expect=413,
           body={"type": noop, "key": "big-" + run, "payload": big})
    c.call("(body over the limit, not sent)", "POST", T, expect=413, raw=iter(()),
           headers={"Content-Length": str(c.args.max_body_bytes + 1)})

    # -- one task, its attempts, retry
    c.wait_task(st["noop1"], ("succeeded",))
    ans = c.call("(succeeded)", "GET", TID, {"id": st["noop1"]}, expect=200)
    c.check(ans.get("payload") == {"hello": "world", "n": [1, 2]}, "task payload round-trips",
            ["payload %r" % ans.get("payload")])
    c.call("", "HEAD", TID, {"id": st["noop1"]}, expect=200)
    ans = c.call("(succeeded)", "GET", TID + "/attempts", {"id": st["noop1"]}, expect=200)
    c.check(any(a.get("outcome") == "succeeded" for a in ans.get("attempts", default=[])),
            "attempts of a succeeded task hold a succeeded attempt")
    ans = c.call("(succeeded task)", "POST", TID + "/retry", {"id": st["noop1"]}, expect=200)
    c.check(ans.get("status") == "pending", "retry answers the task pending",
            ["status %r" % ans.get("status")])
    c.call("(not a number)", "GET", TID, path="/v1/tasks/abc", expect=400)
    c.call("(zero)", "GET", TID, {"id": 0}, expect=400)
    unknown = 9223372036854775807
    c.call("(unknown)", "GET", TID, {"id": unknown}, expect=404)
    c.call("(unknown)", "GET", TID + "/attempts", {"id": unknown}, expect=404)
    c.call("(unknown)", "POST", TID + "/retry", {"id": unknown}, expect=404)
    c.call("(unknown)", "POST", TID + "/result", {"id": unknown}, expect=404,
           body={"attempt": 1, "outcome": "succeeded"})

    # -- a running task: 409, results stale and accepted, dead
    t = c.wait_task(st["slow_dead"], ("running",))
    attempt = (t or {}).get("attempt") or 1
    ans = c.call("(running)", "GET", TID + "/attempts", {"id": st["slow_dead"]}, expect=200)
    c.check(any(a.get("outcome") == "running" for a in ans.get("attempts", default=[])),
            "attempts of a running task hold the running attempt")
    c.call("(running task)", "POST", TID + "/retry", {"id": st["slow_dead"]}, expect=409)
    R = TID + "/result"
    c.call("(no attempt)", "POST", R, {"id": st["slow_dead"]}, expect=400,
           body={"outcome": "succeeded"})
    c.call("(bad outcome)", "POST", R, {"id": st["slow_dead"]}, expect=400,
           body={"attempt": 1, "outcome": "great"})
    c.call("(result over the limit)", "POST", R, {"id": st["slow_dead"]}, expect=413,
           body={"attempt": attempt, "outcome": "succeeded", "result": big})
    ans = c.call("(stale attempt)", "POST", R, {"id": st["slow_dead"]}, expect=200,
                 body={"attempt": attempt + 5, "outcome": "succeeded"})
    c.check(ans.get("accepted") is False, "a stale result is not accepted")
    P = TID + "/progress"
    ans = c.call("(running attempt)", "POST", P, {"id": st["slow_dead"]}, expect=200,
                 body={"attempt": attempt, "progress": 0.5, "processed": 10, "failed": 1,
                       "message": "half way"})
    c.check(ans.get("accepted") is True, "the running attempt's progress is accepted")
    ans = c.call("(stale attempt)", "POST", P, {"id": st["slow_dead"]}, expect=200,
                 body={"attempt": attempt + 5, "processed": 1})
    c.check(ans.get("accepted") is False, "a stale attempt's progress is not accepted")
    c.call("(progress out of range)", "POST", P, {"id": st["slow_dead"]}, expect=400,
           body={"attempt": attempt, "progress": 2})
    ans = c.call("(with progress)", "GET", TID, {"id": st["slow_dead"]}, expect=200)
    c.check(ans.get("progress", "processed") == 10, "a task shows its progress",
            ["progress %r" % ans.get("progress")])
    L = TID + "/logs"
    ans = c.call("(running attempt)", "POST", L, {"id": st["slow_dead"]}, expect=200,
                 body={"attempt": attempt, "lines": ["opened", "page 1"]})
    c.check(ans.get("accepted") is True, "the running attempt's lines are accepted")
    c.call("(no lines)", "POST", L, {"id": st["slow_dead"]}, expect=400,
           body={"attempt": attempt, "lines": []})
    ans = c.call("(after a line)", "GET", L, {"id": st["slow_dead"]}, expect=200,
                 query={"after": "0", "limit": "1"})
    c.check(ans.get("lines", 0, "line") == "opened", "the log reads from its first line",
            ["lines %r" % ans.get("lines")])
    c.call("(bad after)", "GET", L, {"id": st["slow_dead"]}, expect=400, query={"after": "x"})
    ans = c.call("(fail)", "POST", R, {"id": st["slow_dead"]}, expect=200,
                 body={"attempt": str(attempt), "outcome": "fail", "error": "failed by "
                       "check_openapi.py", "result": {"partial": True}})
    c.check(ans.get("accepted") is True, "the running attempt's result is accepted")
    ans = c.call("(dead)", "GET", TID, {"id": st["slow_dead"]}, expect=200)
    c.check(ans.get("status") == "dead", "a failed attempt makes the task dead",
            ["status %r" % ans.get("status")])

    # -- a failed task waiting out its backoff
    t = c.wait_task(st["slow_backoff"], ("running",))
    ans = c.call("(retry)", "POST", R, {"id": st["slow_backoff"]}, expect=200,
                 body={"attempt": (t or {}).get("attempt", 1), "outcome": "retry",
                       "error": "try again later"})
    ans = c.call("(failed, in backoff)", "GET", TID, {"id": st["slow_backoff"]}, expect=200)
    c.check(ans.get("status") == "failed", "a retried attempt makes the task failed",
            ["status %r" % ans.get("status")])
    c.check(ans.get("waiting", "reason") == "retry_backoff",
            "a failed task in its backoff is waiting: retry_backoff",
            ["waiting %r" % ans.get("waiting")])

    # -- the batch
    for key in ("b-1-", "b-2-"):
        ans = c.http("GET", "/v1/tasks", query={"type": noop, "key": key + run})
        for t in (ans.get("tasks") or []):
            c.wait_task(t["id"], ("succeeded",))
    B = "/v1/batches/{batch}"
    ans = c.call("", "GET", B, {"batch": batch}, expect=200)
    c.check(ans.get("total") == 3 and ans.get("counts", "dead") == 1,
            "batch counts: 3 tasks, 1 dead", ["%r" % ans.json])
    c.call("", "HEAD", B, {"batch": batch}, expect=200)
    c.call("(unknown)", "GET", B, {"batch": "oa-none-" + run}, expect=404)
    c.call("(path not UTF-8)", "GET", B, path="/v1/batches/%FF", expect=400)
    ans = c.call("", "POST", B + "/retry-failed", {"batch": batch}, expect=200)
    c.check(ans.get("retried") == 1, "retry-failed re-arms the dead task", ["%r" % ans.json])
    ans = c.call("(unknown batch)", "POST", B + "/retry-failed", {"batch": "oa-none-" + run},
                 expect=200)
    c.check(ans.get("retried") == 0, "retry-failed of an unknown batch re-arms nothing")

    # -- cancel
    C = "/v1/tasks/cancel"
    ans = c.call("(by id)", "POST", C, expect=200, body={"id": st["slow_dead"]})
    c.check(ans.get("outcome") == "cancelled", "cancel by id: cancelled",
            ["outcome %r" % ans.get("outcome")])
    ans = c.call("(by id, again)", "POST", C, expect=200, body={"id": str(st["slow_dead"])})
    c.check(ans.get("outcome") == "unchanged", "cancel again: unchanged",
            ["outcome %r" % ans.get("outcome")])
    ans = c.call("(by type and key)", "POST", C, expect=200,
                 body={"type": st["unrun"][0], "key": st["unrun"][1]})
    if st["unrun_pending"]:
        c.check(ans.get("outcome") == "cancelled", "cancel by type and key: cancelled",
                ["outcome %r" % ans.get("outcome")])
    c.call("(failed task)", "POST", C, expect=200, body={"id": st["slow_backoff"]})
    c.call("(empty)", "POST", C, expect=400, body={})
    c.call("(id and key)", "POST", C, expect=400, body={"id": 1, "type": noop, "key": "k"})
    c.call("(id not an integer)", "POST", C, expect=400, body={"id": "abc"})
    c.call("(unknown id)", "POST", C, expect=404, body={"id": unknown})
    c.call("(unknown unit)", "POST", C, expect=404, body={"type": noop, "key": "none-" + run})

    # -- reschedule
    S = "/v1/tasks/reschedule"
    ans = c.call("(waiting task)", "POST", S, expect=200, body={
        "type": noop, "key": "far-" + run, "execute_at": "2098-06-01T12:00:00.5+02:00"})
    c.check(ans.get("outcome") == "updated", "reschedule of a waiting task: updated",
            ["outcome %r" % ans.get("outcome")])
    ans = c.call("(no task yet)", "POST", S, expect=200, body={
        "type": noop, "key": "resched-new-" + run, "execute_at": "2099-01-01T00:00:00Z",
        "payload": {"made": "by reschedule"}})
    c.check(ans.get("outcome") == "created", "reschedule of an unknown unit: created",
            ["outcome %r" % ans.get("outcome")])
    c.call("(no execute_at)", "POST", S, expect=400, body={"type": noop, "key": "far-" + run})
    c.call("(not JSON)", "POST", S, expect=400, body='{"type": ')
    c.call("(payload over the limit)", "POST", S, expect=413, body={
        "type": noop, "key": "far-" + run, "execute_at": "2099-01-01T00:00:00Z", "payload": big})
    c.call("(cleanup)", "POST", C, expect=200, body={"type": noop, "key": "resched-new-" + run})
    c.call("(cleanup)", "POST", C, expect=200, body={"id": st["far"]})

    # -- list
    ans = c.call("(batch)", "GET", T, query={"batch": batch}, expect=200)
    c.check(len(ans.get("tasks", default=[])) == 3, "list by batch: 3 tasks")
    ans = c.call("(page of 1)", "GET", T, query={"type": noop, "limit": 1}, expect=200)
    token = ans.get("next_page_token")
    c.check(isinstance(token, str), "a page of 1 has a next_page_token", ["%r" % token])
    if isinstance(token, str):
        c.call("(next page)", "GET", T, query={"type": noop, "limit": 1, "page_token": token},
               expect=200)
    c.call("(unit and status)", "GET", T, query={"type": noop, "key": "noop-1-" + run,
                                                 "status": "succeeded"}, expect=200)
    c.call("(no filter)", "GET", T, expect=200)
    c.call("", "HEAD", T, expect=200)
    c.call("(bad status)", "GET", T, query={"status": "sleeping"}, expect=400)
    c.call("(limit 0)", "GET", T, query={"limit": 0}, expect=400)
    c.call("(bad page_token)", "GET", T, query={"page_token": "zz"}, expect=400)
    c.call("(unknown parameter)", "GET", T, query={"colour": "red"}, expect=400)
    c.call("(URL over 8 KiB)", "GET", T, query={"type": "a" * 9000}, expect=414)


def check_cluster(c, run, st):
    ans = c.call("", "GET", "/v1/stats", expect=200, headers={"X-Small": "v"})
    c.check(c.args.noop_type in (ans.get("counts") or {}), "stats count the NOOP tasks")
    c.call("(headers over 16 KiB)", "GET", "/v1/stats", expect=431,
           headers={"X-Big": "b" * 20000})
    ans = c.call("", "GET", "/v1/nodes", expect=200)
    c.check(any(n.get("link") == "self" for n in ans.get("nodes", default=[])),
            "nodes list the answering node (link self)")

    A = "/v1/alerts"
    deadline = time.time() + c.args.wait
    found = None
    while time.time() < deadline and not found:
        ans = c.http("GET", A)
        found = [a for a in (ans.get("alerts") or []) if a.get("task_id") == st.get("slow_dead")]
        if not found:
            time.sleep(0.5)
    c.call("", "GET", A, expect=200)
    c.check(bool(found), "a dead_task alert is raised for the dead task %s" % st.get("slow_dead"))
    c.call("(since an id)", "GET", A, query={"since": 0, "limit": 5}, expect=200)
    hour_ago = rfc3339(datetime.datetime.now(datetime.timezone.utc) - datetime.timedelta(hours=1))
    c.call("(since a time)", "GET", A, query={"since": hour_ago}, expect=200)
    c.call("(limit 0)", "GET", A, query={"limit": 0}, expect=400)
    c.call("(bad since)", "GET", A, query={"since": "yesterday"}, expect=400)
    c.call("(unknown parameter)", "GET", A, query={"colour": "red"}, expect=400)


def check_jobs(c, run, st):
    noop = c.args.noop_type
    every, cron = "oa-every-" + run, "oa-cron." + run
    J, JN = "/v1/jobs", "/v1/jobs/{name}"
    job = {"schedule": "@every 1s", "type": noop, "payload": {"job": True},
           "description": "made by check_openapi.py"}
    ans = c.call("(new)", "PUT", JN, {"name": every}, expect=201, body=job)
    c.check(ans.get("created") is True, "PUT of a new job: created")
    ans = c.call("(same again)", "PUT", JN, {"name": every}, expect=200, body=dict(job, name=every))
    c.check(ans.get("created") is False, "PUT of an existing job: not created")
    ans = c.call("(per-second cron)", "PUT", JN, {"name": cron}, expect=201, body={
        "schedule": "*/5 * * * * *", "time_zone": "Europe/Berlin", "type": noop, "priority": "2",
        "max_retries": 1, "timeout_ms": 10000, "backoff": {"kind": "fixed", "base_ms": 500},
        "overlap": "skip", "misfire": "skip", "catch_up_limit": 3, "enabled": True})
    c.call("(quartz dialect)", "PUT", JN, {"name": "oa-quartz-" + run}, expect=201,
           body={"schedule": "0 0 9 ? * 6#3", "dialect": "quartz", "type": noop})
    c.call("(unknown dialect)", "PUT", JN, {"name": "oa-quartz-" + run}, expect=400,
           body={"schedule": "@daily", "dialect": "cron", "type": noop})
    c.call("", "GET", JN, {"name": cron}, expect=200)
    c.call("", "HEAD", JN, {"name": cron}, expect=200)
    ans = c.call("", "GET", J, expect=200)
    names = {j.get("name") for j in ans.get("jobs", default=[])}
    c.check({every, cron} <= names, "the job list holds both jobs")

    T = JN + "/trigger"
    ans = c.call("(with payload)", "POST", T, {"name": every}, expect=201,
                 body={"payload": {"manual": True}})
    c.check(ans.get("kind") == "manual", "a trigger is a manual firing")
    c.call("(no body)", "POST", T, {"name": every}, expect=201)
    c.call("(unknown job)", "POST", T, {"name": "oa-none-" + run}, expect=404)
    c.call("(not JSON)", "POST", T, {"name": every}, expect=400, body="{")
    c.call("(payload over the limit)", "POST", T, {"name": every}, expect=413,
           body={"payload": "x" * (c.args.max_payload_bytes + 100)})

    F = JN + "/firings"
    deadline = time.time() + c.args.wait
    scheduled = False
    while time.time() < deadline and not scheduled:
        ans = c.http("GET", c.fill(F, {"name": every}))
        scheduled = any(f.get("kind") == "scheduled" for f in (ans.get("firings") or []))
        if not scheduled:
            time.sleep(0.5)
    c.check(scheduled, "the @every 1s job fires on its schedule")
    c.call("", "GET", F, {"name": every}, expect=200)
    ans = c.call("(limit 1)", "GET", F, {"name": every}, query={"limit": 1}, expect=200)
    c.check(len(ans.get("firings", default=[])) <= 1, "firings?limit=1 gives at most 1")
    c.call("(unknown job)", "GET", F, {"name": "oa-none-" + run}, expect=200)
    c.call("(limit 0)", "GET", F, {"name": every}, query={"limit": 0}, expect=400)

    N = JN + "/next"
    ans = c.call("(count 3)", "GET", N, {"name": cron}, query={"count": 3}, expect=200)
    c.check(len(ans.get("times", default=[])) == 3, "next?count=3 gives 3 times")
    c.call("(default count)", "GET", N, {"name": every}, expect=200)
    c.call("(count 101)", "GET", N, {"name": cron}, query={"count": 101}, expect=400)
    c.call("(unknown job)", "GET", N, {"name": "oa-none-" + run}, expect=404)

    ans = c.call("", "POST", JN + "/pause", {"name": cron}, expect=200)
    c.check(ans.get("enabled") is False and ans.get("next_fire_at") is None,
            "a paused job is disabled, with no next fire time")
    ans = c.call("(paused)", "GET", N, {"name": cron}, expect=200)
    c.check(ans.get("paused") is True and len(ans.get("times", default=[])) == 5,
            "a paused job previews the times it would fire at, were it resumed now")
    ans = c.call("", "POST", JN + "/resume", {"name": cron}, expect=200)
    c.check(ans.get("enabled") is True, "a resumed job is enabled")
    for action in ("pause", "resume"):
        c.call("(unknown job)", "POST", JN + "/" + action, {"name": "oa-none-" + run}, expect=404)

    c.call("(bad schedule)", "PUT", JN, {"name": "oa-bad-" + run}, expect=400,
           body={"schedule": "61 * * * *", "type": noop})
    c.call("(unknown field)", "PUT", JN, {"name": "oa-bad-" + run}, expect=400,
           body={"schedule": "@daily", "type": noop, "colour": 1})
    c.call("(name differs)", "PUT", JN, {"name": "oa-bad-" + run}, expect=400,
           body={"schedule": "@daily", "type": noop, "name": "other"})
    c.call("(bad name)", "PUT", JN, {"name": "bad name"}, expect=400,
           body={"schedule": "@daily", "type": noop})
    c.call("(payload over the limit)", "PUT", JN, {"name": "oa-bad-" + run}, expect=413,
           body={"schedule": "@daily", "type": noop,
                 "payload": "x" * (c.args.max_payload_bytes + 100)})
    c.call("(unknown)", "GET", JN, {"name": "oa-none-" + run}, expect=404)

    ans = c.call("", "DELETE", JN, {"name": cron}, expect=200)
    c.call("(again)", "DELETE", JN, {"name": cron}, expect=404)
    c.call("(deleted)", "GET", JN, {"name": cron}, expect=404)
    c.call("(cleanup)", "DELETE", JN, {"name": every}, expect=200)


def check_workflows(c, run, st):
    noop, slow = c.args.noop_type, c.args.slow_type
    W, WI = "/v1/workflows", "/v1/workflows/{id}"
    flow = {"name": "oa-flow", "key": "oa-flow-" + run, "steps": [
        {"name": "first", "type": noop, "payload": {"n": 1}},
        {"name": "fan", "type": noop, "routing": "broadcast", "shards": 2, "after": ["first"]},
        {"name": "last", "type": noop, "after": ["fan", {"step": "first", "on_failure": "run"}],
         "priority": 2, "backoff": {"kind": "fixed", "base_ms": 100}}]}
    ans = c.call("(new)", "POST", W, expect=201, body=flow)
    flow_id = ans.get("id")
    c.check(ans.get("outcome") == "created" and len(ans.get("steps", default=[])) == 3,
            "a new workflow is created with its steps")
    ans = c.call("(same key)", "POST", W, expect=200, body=flow)
    c.check(ans.get("outcome") == "duplicate" and ans.get("id") == flow_id,
            "a workflow with the key of an earlier one is that one")
    c.call("(cycle)", "POST", W, expect=400, body={"name": "oa", "steps": [
        {"name": "a", "type": noop, "after": ["b"]}, {"name": "b", "type": noop, "after": ["a"]}]})
    c.call("(unknown step)", "POST", W, expect=400,
           body={"name": "oa", "steps": [{"name": "a", "type": noop, "after": ["x"]}]})
    c.call("(unknown field)", "POST", W, expect=400,
           body={"name": "oa", "steps": [{"name": "a", "type": noop, "colour": 1}]})
    c.call("(no steps)", "POST", W, expect=400, body={"name": "oa", "steps": []})
    c.call("(not JSON)", "POST", W, expect=400, body="{")
    c.call("(payload over the limit)", "POST", W, expect=413, body={"name": "oa", "steps": [
        {"name": "a", "type": noop, "payload": "x" * (c.args.max_payload_bytes + 100)}]})

    deadline = time.time() + c.args.wait
    status = None
    while time.time() < deadline and status != "succeeded":
        status = c.http("GET", c.fill(WI, {"id": flow_id})).get("status")
        if status != "succeeded":
            time.sleep(0.2)
    c.check(status == "succeeded", "the workflow runs to its end")
    c.call("", "GET", WI, {"id": flow_id}, expect=200)
    c.call("", "HEAD", WI, {"id": flow_id}, expect=200)
    c.call("(unknown)", "GET", WI, {"id": 999999999}, expect=404)
    c.call("(not an id)", "GET", WI, path=W + "/x", expect=400)
    ans = c.call("", "GET", W, query={"limit": 5}, expect=200)
    c.check(any(w.get("id") == flow_id for w in ans.get("workflows", default=[])),
            "the list holds the workflow")
    c.call("(limit 0)", "GET", W, query={"limit": 0}, expect=400)

    ans = c.call("(batch with callbacks)", "POST", "/v1/tasks", expect=200, body={
        "tasks": [{"type": noop, "key": "oa-cb-%s-%d" % (run, i), "batch": "oa-cb-" + run}
                  for i in range(3)],
        "on_finish": {"type": noop, "payload": {"report": True}},
        "on_success": {"type": noop, "key": "oa-cb-success-" + run, "priority": 2}})
    c.check(ans.get("on_finish", "outcome") == "created"
            and ans.get("on_success", "outcome") == "created",
            "a batch's callbacks are created with it")
    c.call("(callback twice)", "POST", "/v1/tasks", expect=400, body={
        "tasks": [{"type": noop, "key": "oa-cb-more-" + run, "batch": "oa-cb-" + run}],
        "on_finish": {"type": noop}})

    held = {"name": "oa-held", "steps": [
        {"name": "slow", "type": slow, "key": "oa-held-" + run, "payload": {"ms": 600000}},
        {"name": "after", "type": noop, "after": ["slow"]}]}
    held_id = c.call("(to cancel)", "POST", W, expect=201, body=held).get("id")
    ans = c.call("", "POST", WI + "/cancel", {"id": held_id}, expect=200)
    c.check(ans.get("cancelled") == 2, "a cancel ends every unfinished step")
    c.call("(unknown)", "POST", WI + "/cancel", {"id": 999999999}, expect=404)
    c.call("(beside a live task of a step's unit)", "POST", "/v1/tasks", expect=200, body={
        "type": slow, "key": "oa-held-" + run, "execute_at": "2999-01-01T00:00:00Z"})
    c.call("(a step's unit has a live task)", "POST", WI + "/retry", {"id": held_id}, expect=409)
    c.call("(cleanup)", "POST", "/v1/tasks/cancel", expect=200,
           body={"type": slow, "key": "oa-held-" + run})
    ans = c.call("", "POST", WI + "/retry", {"id": held_id}, expect=200)
    c.check(ans.get("retried") == 2, "a retry runs the cancelled steps again")
    c.call("(cleanup)", "POST", WI + "/cancel", {"id": held_id}, expect=200)
    c.call("(unknown)", "POST", WI + "/retry", {"id": 999999999}, expect=404)


def check_key_spaces(c, run, st):
    """The node runs KEYED (--keyed-type) keyed in space --key-space, its key
    given at submit, one running a key."""
    K, KN = "/v1/key-spaces", "/v1/key-spaces/{name}"
    KK, KS = KN + "/keys/{key}", KN + "/keys"
    space, spare = c.args.key_space, "oa-spare-" + run
    key = "oa-" + run
    for i in range(3):
        c.call("(keyed)", "POST", "/v1/tasks", expect=200, body={
            "type": c.args.keyed_type, "key": "%s-%d" % (key, i), "concurrency_key": key,
            "payload": {"ms": 60000}})
    c.call("(given no key)", "POST", "/v1/tasks", expect=200, body={
        "type": c.args.keyed_type, "key": key + "-shared", "payload": {"ms": 60000}})
    ans = c.call("", "GET", K, expect=200)
    names = [s.get("name") for s in ans.get("key_spaces", default=[])]
    c.check(space in names, "the key space list holds the config's space", names)
    ans = c.call("(top 5)", "GET", KN, {"name": space}, query={"top": 5}, expect=200)
    c.check(any(k.get("key") == key for k in ans.get("top_due", default=[])),
            "the key with due tasks is among the top due")
    c.call("(top 0)", "GET", KN, {"name": space}, query={"top": 0}, expect=400)
    c.call("(unknown)", "GET", KN, {"name": "oa-none-" + run}, expect=404)
    deadline = time.time() + c.args.wait
    ans = None
    while time.time() < deadline:
        ans = c.http("GET", c.fill(KK, {"name": space, "key": key}))
        if ans.status == 200 and ans.get("running") == 1:
            break
        time.sleep(0.2)
    ans = c.call("", "GET", KK, {"name": space, "key": key}, query={"tasks": 2}, expect=200)
    c.check(ans.get("running") == 1 and ans.get("due") == 2,
            "a key limited to 1 runs one task, two due", [short(json.dumps(ans.json))])
    c.call("(tasks 101)", "GET", KK, {"name": space, "key": key}, query={"tasks": 101},
           expect=400)
    ans = c.call("(the key \"\")", "GET", KS, {"name": space}, expect=200)
    c.check(ans.get("key") == "" and ans.get("running", default=0) + ans.get("due", default=0) == 1,
            "the key \"\" is its own key")
    ans = c.call("(new)", "PUT", KN, {"name": spare}, expect=201,
                 body={"limit": 3, "keys": {"acme": 10}, "rate": 100, "period_ms": 60000})
    c.check(ans.get("created") is True, "PUT of a new key space: created")
    ans = c.call("(again)", "PUT", KN, {"name": spare}, expect=200, body={"limit": "4"})
    c.check(ans.get("created") is False and ans.get("key_space", "limit") == 4
            and ans.get("key_space", "rate") is None,
            "PUT of an existing key space: changed, the rate it no longer names gone")
    c.call("(limit 0)", "PUT", KN, {"name": spare}, expect=400, body={"limit": 0})
    c.call("(rate without period)", "PUT", KN, {"name": spare}, expect=400,
           body={"limit": 1, "rate": 5})
    c.call("(unknown field)", "PUT", KN, {"name": spare}, expect=400, body={"limit": 1, "x": 1})
    c.call("(not JSON)", "PUT", KN, {"name": spare}, expect=400, body="{")
    c.call("(a type is keyed in it)", "DELETE", KN, {"name": space}, expect=409)
    c.call("", "DELETE", KN, {"name": spare}, expect=200)
    c.call("(again)", "DELETE", KN, {"name": spare}, expect=404)
    for suffix in ("-0", "-1", "-2", "-shared"):
        c.call("(cleanup)", "POST", "/v1/tasks/cancel", expect=200,
               body={"type": c.args.keyed_type, "key": key + suffix})


def check_coverage(c):
    for template, item in c.doc["paths"].items():
        for method in item:
            if method not in METHODS:
                continue
            key = (method.upper(), template)
            c.check(key in c.exercised, "documented %s %s answered 2xx at least once" % key,
                    ["never called successfully: does the endpoint exist?"])


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--base-url", required=True, help="the node's API, e.g. http://127.0.0.1:8480")
    p.add_argument("--token", default=os.environ.get("TASKMILL_API_TOKEN", ""),
                   help="the node's api.token (default: $TASKMILL_API_TOKEN)")
    p.add_argument("--doc", required=True, help="messages/openapi.json")
    p.add_argument("--noop-type", default="NOOP", help="a type the node runs with `noop`")
    p.add_argument("--slow-type", default="SLOW", help="a type the node runs with `sleep`")
    p.add_argument("--keyed-type", default="KEYED",
                   help="a type the node runs with `sleep`, keyed as given in --key-space")
    p.add_argument("--key-space", default="oa-tenants", help="a key space with a limit of 1")
    p.add_argument("--max-payload-bytes", type=int, default=1 << 20,
                   help="the node's api.max_payload_bytes")
    p.add_argument("--max-body-bytes", type=int, default=64 << 20,
                   help="the node's api.max_body_bytes")
    p.add_argument("--ready-timeout", type=float, default=60, help="seconds to wait for /readyz")
    p.add_argument("--wait", type=float, default=30,
                   help="seconds to wait for a task, a firing or an alert")
    p.add_argument("--http-timeout", type=float, default=70, help="seconds per request")
    args = p.parse_args()

    with open(args.doc, encoding="utf-8") as f:
        doc = json.load(f)
    c = Checker(args, doc)
    run = "%d-%d" % (time.time(), os.getpid())
    st = {}
    try:
        check_document(c, doc)
        if wait_ready(c):
            check_probes_and_document(c, doc)
            check_auth(c)
            check_methods(c)
            check_tasks(c, run, st)
            check_cluster(c, run, st)
            check_jobs(c, run, st)
            check_workflows(c, run, st)
            check_key_spaces(c, run, st)
            check_coverage(c)
    except Exception as e:  # a crash of the checker is a failure, not a silent stop
        import traceback
        traceback.print_exc()
        c.check(False, "the checks ran to the end", ["%s: %s" % (type(e).__name__, e)])
    print("%d passed, %d failed" % (c.passed, c.failed))
    return 1 if c.failed else 0


if __name__ == "__main__":
    sys.exit(main())
