#!/usr/bin/env python3
"""The console (SPEC §8) in a real browser: headless Chromium, driven by
Selenium, against a real node with data. It goes through every page, asks
for the token once, performs retry, cancel, reschedule and a job trigger,
and checks each result through the API, not through the page. Writes
screenshots of the overview and a task's detail to --screenshots."""

import argparse
import os
import sys
import tempfile
import time
import traceback

from selenium.common.exceptions import StaleElementReferenceException, TimeoutException
from selenium.webdriver.common.action_chains import ActionChains
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.support.ui import WebDriverWait

from checks import check, eventually, results
from chromium import browser
from taskmill_node import running_node

TOKEN = "console-test-token"


def sel(test, **attrs):
    extra = "".join('[data-%s="%s"]' % (k.replace("_", "-"), v) for k, v in attrs.items())
    return '[data-test="%s"]%s' % (test, extra)


class Console:
    def __init__(self, driver, base):
        self.driver = driver
        self.base = base

    def open(self, route):
        self.driver.get(self.base + "/ui/#" + route)

    def find(self, test, seconds=15, **attrs):
        css = sel(test, **attrs)
        try:
            # An element the console redrew between the lookup and
            # is_displayed is looked up again on the next poll.
            return WebDriverWait(self.driver, seconds,
                                 ignored_exceptions=[StaleElementReferenceException]).until(
                lambda d: next((e for e in d.find_elements(By.CSS_SELECTOR, css) if e.is_displayed()), None))
        except TimeoutException:
            raise AssertionError("no visible %s on %s" % (css, self.driver.current_url))

    def click(self, test, **attrs):
        self.fresh(lambda e: e.click(), test, **attrs)

    def fresh(self, use, test, **attrs):
        """use(element), with the element found again when a refresh replaced it
        in between (the console redraws what changed at every poll)."""
        for _ in range(50):
            try:
                return use(self.find(test, **attrs))
            except StaleElementReferenceException:
                time.sleep(0.1)
        raise AssertionError("%s kept being replaced" % sel(test, **attrs))

    def text(self, test, **attrs):
        return self.fresh(lambda e: e.text, test, **attrs)

    def follow(self, test, **attrs):
        """Follows the link in a row."""
        self.fresh(lambda e: e.find_element(By.TAG_NAME, "a").click(), test, **attrs)

    def confirm(self):
        self.click("confirm")

    def banner(self):
        banner = self.driver.find_element(By.CSS_SELECTOR, sel("error"))
        return banner.text if banner.is_displayed() else ""


def all_tasks(node, query):
    """Every task matching `query`, page after page: a page reads a bounded
    stretch of the table, so a match may lie beyond a short or empty one."""
    tasks, token = [], None
    while True:
        page = node.call("GET", "/v1/tasks?" + query + ("&page_token=" + token if token else ""))[1]
        tasks += page["tasks"]
        token = page.get("next_page_token")
        if not token:
            return tasks


def arrange(node):
    """Data for every page: tasks in several states, a batch, a job."""
    def submit(task):
        status, body = node.call("POST", "/v1/tasks", task)
        assert status == 200, (status, body)
        return body["task"]

    for i in range(5):
        submit({"type": "NOOP", "key": "done-%d" % i, "batch": "nightly"})
    doomed = submit({"type": "FAIL", "key": "doomed", "batch": "nightly"})
    later = submit({"type": "SLOW", "key": "later", "execute_at": "2099-01-01T00:00:00Z",
                    "payload": {"pages": 12}})
    unwanted = submit({"type": "SLOW", "key": "unwanted", "execute_at": "2099-06-01T00:00:00Z"})
    child = submit({"type": "NOOP", "key": "after-later", "after": [later["id"]]})
    status, _ = node.call("PUT", "/v1/jobs/hourly-digest", {"schedule": "0 0 1 1 *", "type": "NOOP"})
    assert status in (200, 201), status
    status, _ = node.call("PUT", "/v1/jobs/hourly-report",
                          {"schedule": "0 * * * *", "type": "NOOP", "payload": {"scope": "all"},
                           "child_jobs": ["hourly-digest"]})
    assert status in (200, 201), status
    eventually(lambda: node.call("GET", "/v1/tasks/%d" % doomed["id"])[1]["status"] == "dead")
    attempt = node.call("GET", "/v1/tasks/%d" % doomed["id"])[1]["attempt"]
    status, ack = node.call("POST", "/v1/tasks/%d/logs" % doomed["id"],
                            {"attempt": attempt, "lines": ["the fail executor failed it"]})
    assert status == 200 and ack["accepted"], (status, ack)
    # A task of another batch that reports records as it runs.
    ingest = submit({"type": "SLOW", "key": "ingest", "batch": "ingest", "payload": {"ms": 1500},
                     "timeout_ms": 30000})
    eventually(lambda: node.call("GET", "/v1/tasks/%d" % ingest["id"])[1]["status"] == "running")
    status, ack = node.call("POST", "/v1/tasks/%d/progress" % ingest["id"],
                            {"attempt": 1, "processed": 200, "failed": 10})
    assert status == 200 and ack["accepted"], (status, ack)
    # Keyed tasks: acme runs 3 (its own limit) with 2 due, beta 2 with 1 due.
    for tenant, n in (("acme", 5), ("beta", 3)):
        for i in range(n):
            submit({"type": "KEYED", "key": "%s-%d" % (tenant, i),
                    "payload": {"tenant": tenant, "ms": 120000}})
    # More tasks than a page of the task list reads (50,000), due long after
    # the test, so that a filter matching none of them comes back short.
    for b in range(55):
        status, body = node.call("POST", "/v1/tasks", {"tasks": [
            {"type": "CALENDAR", "key": "c-%d-%d" % (b, i), "execute_at": "2099-01-01T00:00:00Z"}
            for i in range(1000)]})
        assert status == 200, (status, body)
    return doomed, later, unwanted, child


def walk(console, node, doomed, later, unwanted, child, shots):
    driver = console.driver

    # The token is asked once, then kept for the browser session.
    console.open("/overview")
    console.find("token-input").send_keys(TOKEN)
    console.click("token-save")
    succeeded = lambda: console.text("count", type="NOOP", status="succeeded").strip()  # noqa: E731
    check("overview: counts per type and status", eventually(lambda: succeeded() == "5"),
          succeeded())
    check("overview: throughput chart", console.find("chart") is not None)
    check("overview: the node's in flight", console.find("node-running", node="console") is not None)
    check("overview: limits in use", console.find("limit-row", scope="node:console") is not None)
    check("overview: the dead task's alert", console.find("alert-row", seconds=20) is not None)
    driver.save_screenshot(os.path.join(shots, "console-overview.png"))
    driver.refresh()
    console.find("count", type="NOOP", status="succeeded")
    check("the token is kept for the session",
          not driver.find_element(By.CSS_SELECTOR, sel("token-form")).is_displayed())

    # Tasks: a filter, then a task's detail, then retry.
    console.click("nav-tasks")
    type_filter = console.find("filter-type")
    type_filter.clear()
    type_filter.send_keys("FAIL")
    console.click("filter-apply")
    console.follow("task-row", id=doomed["id"])
    check("task detail: status", eventually(lambda: console.text("status").strip() == "dead"))
    check("task detail: attempt history", console.find("attempt-row", attempt=1) is not None)
    check("task detail: the attempt's log", console.find("log-line") is not None)
    attempt = node.call("GET", "/v1/tasks/%d" % doomed["id"])[1]["attempt"]
    status, _ = node.call("POST", "/v1/tasks/%d/logs" % doomed["id"],
                          {"attempt": attempt, "lines": ["a line logged while the page is open"]})
    lines = lambda: driver.find_elements(By.CSS_SELECTOR, sel("log-line"))  # noqa: E731
    check("task detail: the log tails live", status == 200 and eventually(
        lambda: len(lines()) == 2 and "while the page is open" in lines()[1].text),
        [line.text for line in lines()])
    console.click("retry")
    console.confirm()
    retried = eventually(lambda: node.call("GET", "/v1/tasks/%d" % doomed["id"])[1]["attempt"] >= 2)
    check("retry: the task ran again (by the API)", retried)

    # A filter that matches nothing in the stretch a page reads says how far
    # it looked, and offers the next page.
    console.open("/tasks?key=NOTHING")
    scanned = console.text("scanned-to")
    check("tasks: a short page says how far it looked", "Looked through tasks down to id" in scanned,
          scanned)
    check("tasks: a short page offers the next", console.find("next-page") is not None)

    # A task due later says why it is not running; reschedule it.
    console.open("/tasks/%d" % later["id"])
    check("task detail: why it isn't running",
          eventually(lambda: console.find("waiting", reason="due_later") is not None),
          console.text("waiting"))
    check("task detail: payload", "12" in console.text("payload"))
    check("task detail: links its children",
          console.fresh(lambda e: e.find_element("css selector", "a[href='#/tasks/%d']" % child["id"]),
                        "field", field="children") is not None)
    driver.save_screenshot(os.path.join(shots, "console-task.png"))
    at = console.find("reschedule-at")
    driver.execute_script(
        "arguments[0].value = '2098-03-04T05:06'; arguments[0].dispatchEvent(new Event('input', {bubbles: true}));"
        "arguments[0].dispatchEvent(new Event('change', {bubbles: true}));", at)
    zone = console.find("reschedule-zone")
    driver.execute_script(
        "arguments[0].value = 'utc'; arguments[0].dispatchEvent(new Event('change', {bubbles: true}));", zone)
    console.click("reschedule")
    console.confirm()
    moved = eventually(lambda: node.call("GET", "/v1/tasks/%d" % later["id"])[1]["execute_at"]
                       == "2098-03-04T05:06:00Z")
    check("reschedule: the new time is stored (by the API)", moved,
          node.call("GET", "/v1/tasks/%d" % later["id"])[1]["execute_at"])

    # A task waiting for its parent says so, and links it.
    console.open("/tasks/%d" % child["id"])
    check("task detail: waits for its parents",
          eventually(lambda: console.find("waiting", reason="waiting_for_parents") is not None),
          console.text("waiting"))
    check("task detail: links its parents",
          console.fresh(lambda e: e.find_element("css selector", "a[href='#/tasks/%d']" % later["id"]),
                        "field", field="parents") is not None)

    # Cancel, with the confirmation dismissed once first.
    console.open("/tasks/%d" % unwanted["id"])
    console.click("cancel")
    console.click("dismiss")
    time.sleep(0.5)
    check("a dismissed confirmation changes nothing",
          node.call("GET", "/v1/tasks/%d" % unwanted["id"])[1]["status"] == "pending")
    console.click("cancel")
    console.confirm()
    check("cancel: the task is cancelled (by the API)",
          eventually(lambda: node.call("GET", "/v1/tasks/%d" % unwanted["id"])[1]["status"] == "cancelled"))

    # Batches: counts per status.
    console.open("/batches/ingest")
    records = lambda: console.text("batch-records")  # noqa: E731
    check("batch: its records", eventually(lambda: "200 processed, 10 failed (5.0%)" in records()),
          records())
    console.open("/batches/nightly")
    check("batch: counts", eventually(lambda: "6" in console.text("batch-total")),
          console.text("batch-total"))
    # The doomed task died again after its retry: rerun the batch's failures.
    eventually(lambda: node.call("GET", "/v1/tasks/%d" % doomed["id"])[1]["status"] == "dead")
    attempts_before = node.call("GET", "/v1/tasks/%d" % doomed["id"])[1]["attempt"]
    console.click("rerun-failed", batch="nightly")
    console.confirm()
    check("batch: rerun failed ran the dead task again (by the API)",
          eventually(lambda: node.call("GET", "/v1/tasks/%d" % doomed["id"])[1]["attempt"]
                     > attempts_before))

    # Jobs: schedule in words, next fire times, a trigger with a payload.
    console.click("nav-jobs")
    console.follow("job-row", name="hourly-report")
    words = console.text("schedule-words")
    check("job: schedule in words", "hour" in words, words)
    # The XXL-JOB expression of the third Friday, read in each dialect.
    describe = "return window.taskmillConsole.describeSchedule(arguments[0], arguments[1])"
    for dialect, day in (("quartz", "Friday"), ("unix", "Saturday")):
        said = driver.execute_script(describe, "0 0 9 ? * 6#3", dialect)
        check("job: the words of a %s schedule" % dialect,
              said == "at 09:00 on the third %s of every month" % day, said)
    check("job: next fire times", console.find("next-fire") is not None)
    payload = console.find("trigger-payload")
    payload.send_keys('{"scope": "one"')
    console.click("trigger")
    bad = console.text("trigger-error")
    check("trigger: bad JSON is refused in the page", bad != "", bad)
    payload.send_keys("}")
    console.click("trigger")
    console.confirm()

    def manual_firing():
        firings = node.call("GET", "/v1/jobs/hourly-report/firings")[1].get("firings", [])
        return next((f for f in firings if f.get("kind") == "manual"), None)
    firing = eventually(manual_firing)
    check("trigger: a manual firing (by the API)", firing is not None)
    if firing:
        tasks = all_tasks(node, "batch=" + firing["batch"].replace("+", "%2B"))
        check("trigger: its task has the payload",
              len(tasks) == 1 and tasks[0]["payload"] == {"scope": "one"}, tasks)

    # The firing's child job fired, and its page says by whom.
    check("job: its child jobs are links", console.text("child-job") == "hourly-digest")
    digest = eventually(lambda: node.call("GET", "/v1/jobs/hourly-digest/firings")[1].get("firings"))
    check("child job: fired once by the firing (by the API)",
          digest and len(digest) == 1 and digest[0]["parent"]["job"] == "hourly-report", digest)
    console.click("child-job")
    kind = console.text("firing-kind")
    check("child job: its firing says whose child it is", kind == "child of hourly-report", kind)

    # Pause and resume, each checked through the API.
    console.open("/jobs/hourly-report")
    console.click("pause")
    console.confirm()
    check("job: paused (by the API)",
          eventually(lambda: node.call("GET", "/v1/jobs/hourly-report")[1]["enabled"] is False))
    check("job: a paused job previews its fire times",
          console.find("next-paused") is not None and console.find("next-fire") is not None)
    console.click("resume")
    console.confirm()
    check("job: resumed (by the API)",
          eventually(lambda: node.call("GET", "/v1/jobs/hourly-report")[1]["enabled"] is True))

    # A workflow: its graph and steps, cancelled then retried from the page.
    status, wf = node.call("POST", "/v1/workflows", {"name": "console-flow", "steps": [
        {"name": "extract", "type": "NOOP"},
        {"name": "wait", "type": "SLOW", "after": ["extract"],
         "execute_at": "2099-01-01T00:00:00Z"},
        {"name": "load", "type": "NOOP", "after": [{"step": "wait", "on_failure": "run"}]}]})
    check("workflow: submitted (by the API)", status == 201, (status, wf))
    console.click("nav-workflows")
    console.follow("workflow-row", id=wf["id"])
    def unstale(read):
        """read(), again when a refresh replaced the graph in between."""
        for _ in range(50):
            try:
                return read()
            except StaleElementReferenceException:
                time.sleep(0.1)
        raise AssertionError("the workflow's graph kept being replaced")

    def boxes():
        return unstale(lambda: [(b.get_attribute("data-step"), b.get_attribute("data-status"))
                                for b in driver.find_elements(By.CSS_SELECTOR, sel("workflow-step"))])

    def status_of(step):
        return dict(boxes()).get(step)

    check("workflow: a box per step", eventually(lambda: len(boxes()) == 3), boxes())
    edges = unstale(lambda: sorted(
        (e.get_attribute("data-parent"), e.get_attribute("data-child"))
        for e in driver.find_elements(By.CSS_SELECTOR, sel("workflow-edge"))))
    check("workflow: an edge per pair of steps", edges == [("extract", "wait"), ("wait", "load")],
          edges)
    check("workflow: a box takes its step's status",
          eventually(lambda: status_of("extract") == "succeeded"), status_of("extract"))
    check("workflow: the steps table says what a step waits for",
          "load" in console.text("step-row", step="load")
          and "wait (run)" in console.text("step-row", step="load"))
    driver.save_screenshot(os.path.join(shots, "console-workflow.png"))
    console.click("workflow-cancel")
    console.confirm()
    check("workflow: cancelled (by the API)", eventually(
        lambda: node.call("GET", "/v1/workflows/%d" % wf["id"])[1]["status"] == "cancelled"))
    check("workflow: the cancelled step's box says so",
          eventually(lambda: status_of("wait") == "cancelled"), status_of("wait"))
    console.click("workflow-retry")
    console.confirm()
    check("workflow: retried (by the API)", eventually(
        lambda: node.call("GET", "/v1/workflows/%d" % wf["id"])[1]["status"] != "cancelled"))

    # Nodes: role and heartbeat.
    console.click("nav-nodes")
    check("nodes: role", eventually(lambda: console.text("role").strip() == "leader"),
          console.text("role"))
    check("nodes: heartbeat age", console.find("heartbeat-age") is not None)

    # Keys: the key spaces, a space's top keys, a key's page and its tasks.
    console.click("nav-keys")
    check("keys: a space with its running tasks",
          eventually(lambda: console.text("space-running", ).strip() == "5"),
          console.text("space-running"))
    console.follow("space-row", name="tenants")
    check("key space: the key running most",
          eventually(lambda: console.text("key-running", ).strip() == "3"),
          console.text("top-running-row", key="acme"))
    due = console.fresh(lambda e: e.find_element(By.CSS_SELECTOR, sel("key-due")).text,
                        "top-due-row", key="acme")
    check("key space: the key with most due tasks", due.strip() == "2", due)
    driver.save_screenshot(os.path.join(shots, "console-keys.png"))
    console.follow("top-running-row", key="acme")
    limit = console.text("field", field="limit")
    check("key: its own limit", limit.startswith("3 (its own)"), limit)
    rows = lambda: driver.find_elements(By.CSS_SELECTOR, sel("key-task-row"))  # noqa: E731
    check("key: its running and waiting tasks", eventually(lambda: len(rows()) == 5), len(rows()))
    console.follow("key-task-row")
    key = console.text("field", field="concurrency_key")
    check("task: its key links back", key == "acme", key)

    # An API error is shown, not swallowed.
    console.open("/tasks/999999999")
    check("an API error is shown", eventually(lambda: "999999999" in console.banner()), console.banner())

    # Keyboard: the navigation is reachable with Tab.
    console.open("/overview")
    console.find("count", type="NOOP", status="succeeded")
    driver.refresh()
    console.find("count", type="NOOP", status="succeeded")
    reached = []
    for _ in range(12):
        ActionChains(driver).send_keys(Keys.TAB).perform()
        reached.append(driver.switch_to.active_element.get_attribute("data-test"))
    check("keyboard: Tab reaches the navigation", "nav-tasks" in reached, reached)
    # The 401 before the token and the 404 above are the only errors expected.
    errors = [e["message"] for e in driver.get_log("browser") if e["level"] == "SEVERE"
              and "999999999" not in e["message"] and "401" not in e["message"]]
    check("no other errors in the page's console", not errors, errors)


def phone(node, shots):
    """At a phone's width nothing but the tables' own wrappers scrolls sideways."""
    driver = browser(375, 800, mobile=True)
    try:
        console = Console(driver, node.base)
        console.open("/overview")
        console.find("token-input").send_keys(TOKEN)
        console.click("token-save")
        console.find("count", type="NOOP", status="succeeded")
        for route in ("/overview", "/tasks", "/jobs/hourly-report", "/workflows", "/keys/tenants",
                      "/nodes"):
            console.open(route)
            console.find("page-title")
            time.sleep(0.3)
            width = driver.execute_script("return document.documentElement.scrollWidth")
            inner = driver.execute_script("return window.innerWidth")
            check("phone width: %s fits (%s <= %s)" % (route, width, inner), width <= inner + 1)
        driver.save_screenshot(os.path.join(shots, "console-phone.png"))
    finally:
        driver.quit()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--screenshots", default=tempfile.gettempdir())
    args = parser.parse_args()
    os.makedirs(args.screenshots, exist_ok=True)
    options = ["types.NOOP.executor=noop", "types.SLOW.executor=sleep",
               "types.FAIL.executor=fail", "alerts.interval=500ms",
               "types.KEYED.executor=sleep", "types.KEYED.timeout=300s",
               "types.KEYED.key_space=tenants", "types.KEYED.key_path=$.tenant",
               "key_spaces.tenants.limit=2", "key_spaces.tenants.keys.acme=3"]
    with running_node("console", token=TOKEN, options=options) as node:
        doomed, later, unwanted, child = arrange(node)
        driver = browser(1280, 900)
        try:
            walk(Console(driver, node.base), node, doomed, later, unwanted, child, args.screenshots)
        except Exception:
            results["failed"] += 1
            traceback.print_exc()
            driver.save_screenshot(os.path.join(args.screenshots, "console-failure.png"))
            print("the page at the failure:", os.path.join(args.screenshots, "console-failure.png"))
        finally:
            driver.quit()
        try:
            phone(node, args.screenshots)
        except Exception:
            results["failed"] += 1
            traceback.print_exc()
    print("screenshots in", args.screenshots)
    print("%d passed, %d failed" % (results["passed"], results["failed"]))
    return 1 if results["failed"] else 0


if __name__ == "__main__":
    sys.exit(main())
