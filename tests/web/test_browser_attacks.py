#!/usr/bin/env python3
"""What a web page open in the operator's browser can do to a node without a
token (SPEC §8), in a real browser: headless Chromium, driven by Selenium.

A page of another origin (a second HTTP server, on another port) sends a
simple cross-origin POST (text/plain), one that asks for JSON without CORS
(the browser strips the type), and form posts (a task, a job trigger); it
frames the console. A page reached under a host name of its own that
resolves to 127.0.0.1 (Chromium's --host-resolver-rules, as DNS rebinding
would have it) reads and posts as if same-origin. Nothing may change, nothing
may be read, the console may not be framed; then the console still works
from its own origin."""

import http.server
import json
import sys
import threading
import time
import traceback

from selenium.webdriver.common.by import By

from checks import check, eventually, results
from chromium import browser
from taskmill_node import _free_port, running_node

REBOUND = "rebound.attacker.test"


def attacker_pages(node):
    """The attacker's site: each page attacks on load and then sets its
    title to 'done', so that the test knows when the attempt is over."""
    task = lambda key: json.dumps({"type": "NOOP", "key": key})
    return {
        "/simple.html": """<!doctype html><script>
fetch('%(node)s/v1/tasks', {method: 'POST', mode: 'no-cors',
  headers: {'Content-Type': 'text/plain'}, body: '%(simple)s'})
  .finally(() => { document.title = 'done'; });
</script>""" % {"node": node, "simple": task("csrf-simple")},
        "/no-cors-json.html": """<!doctype html><script>
fetch('%(node)s/v1/tasks', {method: 'POST', mode: 'no-cors',
  headers: {'Content-Type': 'application/json'}, body: '%(json)s'})
  .finally(() => { document.title = 'done'; });
</script>""" % {"node": node, "json": task("csrf-no-cors")},
        "/cors-json.html": """<!doctype html><script>
fetch('%(node)s/v1/tasks', {method: 'POST',
  headers: {'Content-Type': 'application/json'}, body: '%(json)s'})
  .then(r => r.text()).then(t => { document.title = 'read:' + t; })
  .catch(() => { document.title = 'done'; });
</script>""" % {"node": node, "json": task("csrf-cors")},
        # enctype text/plain writes name=value: the name carries the JSON
        # up to a last field that swallows the '='.
        "/form.html": """<!doctype html><body>
<iframe name="sink"></iframe>
<form id="task" method="POST" action="%(node)s/v1/tasks" enctype="text/plain" target="sink">
<input name='{"type": "NOOP", "key": "csrf-form", "x": "' value='"}'></form>
<form id="trigger" method="POST" action="%(node)s/v1/jobs/nightly/trigger" target="sink"></form>
<form id="pause" method="POST" action="%(node)s/v1/jobs/nightly/pause" target="sink"
      enctype="application/x-www-form-urlencoded"><input name="a" value="b"></form>
<script>
document.getElementById('task').submit();
setTimeout(() => document.getElementById('trigger').submit(), 300);
setTimeout(() => document.getElementById('pause').submit(), 600);
setTimeout(() => { document.title = 'done'; }, 1500);
</script></body>""" % {"node": node},
        "/frame.html": """<!doctype html><body>
<iframe id="console" src="%(node)s/ui/" width="800" height="600"></iframe>
<script>setTimeout(() => { document.title = 'done'; }, 1500);</script></body>""" % {"node": node},
    }


class Attacker:
    """A second HTTP server, another origin, serving the attacker's pages."""

    def __init__(self, pages):
        self.port = _free_port()
        handler_pages = pages

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                page = handler_pages.get(self.path.split("?")[0])
                body = (page or "not here").encode()
                self.send_response(200 if page else 404)
                self.send_header("Content-Type", "text/html; charset=utf-8")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def url(self, path):
        return "http://127.0.0.1:%d%s" % (self.port, path)

    def close(self):
        self.server.shutdown()


def wait_title(driver, prefix, seconds=10):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if driver.title.startswith(prefix):
            return driver.title
        time.sleep(0.1)
    return driver.title


def stored(node):
    """What the attacks could have changed: tasks, firings, the job."""
    tasks = node.call("GET", "/v1/tasks?type=NOOP")[1]["tasks"]
    firings = node.call("GET", "/v1/jobs/nightly/firings")[1]
    job = node.call("GET", "/v1/jobs/nightly")[1]
    return sorted(t["key"] for t in tasks), firings, job.get("enabled")


def attack(driver, node, attacker):
    status, _ = node.call("PUT", "/v1/jobs/nightly", {"schedule": "0 3 1 1 *", "type": "NOOP"})
    assert status in (200, 201), status
    before = stored(node)
    for page in ("/simple.html", "/no-cors-json.html", "/form.html"):
        driver.get(attacker.url(page))
        check("%s ran its attack" % page, wait_title(driver, "done") == "done", driver.title)
    driver.get(attacker.url("/cors-json.html"))
    title = wait_title(driver, "done")
    check("a cross-origin fetch that asks for JSON reads nothing", title == "done", title)
    time.sleep(1)
    after = stored(node)
    check("no task, firing or pause came of a page of another origin", after == before,
          "%s -> %s" % (before, after))

    # DNS rebinding: the attacker's name resolves to 127.0.0.1, the page is
    # same-origin with the node's port.
    rebound = "http://%s:%s" % (REBOUND, node.base.rsplit(":", 1)[1])
    driver.get(rebound + "/v1/stats")
    body = driver.find_element(By.TAG_NAME, "body").text
    check("a rebound page reads no stats, only why", "misdirected" in body and
          "Host header" in body, body[:200])
    read = driver.execute_async_script("""
      const done = arguments[arguments.length - 1];
      Promise.all([
        fetch('/v1/tasks?type=NOOP').then(r => r.status),
        fetch('/v1/tasks', {method: 'POST', headers: {'Content-Type': 'application/json'},
                            body: '{"type": "NOOP", "key": "rebound"}'}).then(r => r.status),
        fetch('/ui/').then(r => r.status),
      ]).then(done, e => done(String(e)));
    """)
    check("a rebound page's reads, posts and console answer 421", read == [421, 421, 421], read)
    check("nothing came of the rebound page", stored(node) == before, stored(node))

    # Clickjacking: the console in a frame of another site.
    driver.get(attacker.url("/frame.html"))
    wait_title(driver, "done")
    driver.switch_to.frame(driver.find_element(By.ID, "console"))
    framed = driver.find_elements(By.CSS_SELECTOR, '[data-test="nav-overview"]')
    driver.switch_to.default_content()
    check("the console does not show in a frame of another site", not framed)
    blocked = [e for e in driver.get_log("browser") if "frame-ancestors" in e["message"]]
    check("the browser refused the frame for the console's frame-ancestors", bool(blocked))


def console_still_works(driver, node):
    driver.get(node.base + "/ui/#/overview")
    count = eventually(lambda: driver.find_elements(By.CSS_SELECTOR, '[data-test="count"]'))
    check("the console shows the counts from its own origin", bool(count))
    errors = [e for e in driver.get_log("browser") if "Content Security Policy" in e["message"]]
    check("the console breaks no rule of its Content-Security-Policy", not errors, errors)


def main():
    options = ["types.NOOP.executor=noop"]
    with running_node("attacks", options=options) as node:
        attacker = Attacker(attacker_pages(node.base))
        driver = browser(1280, 900, flags=("--host-resolver-rules=MAP %s 127.0.0.1" % REBOUND,))
        try:
            attack(driver, node, attacker)
            node.call("POST", "/v1/tasks", {"type": "NOOP", "key": "mine"})
            console_still_works(driver, node)
        except Exception:
            results["failed"] += 1
            traceback.print_exc()
        finally:
            driver.quit()
            attacker.close()
    print("%d passed, %d failed" % (results["passed"], results["failed"]))
    return 1 if results["failed"] else 0


if __name__ == "__main__":
    sys.exit(main())
