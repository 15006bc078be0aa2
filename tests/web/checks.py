"""Checks of the browser tests: each prints PASS or FAIL and is counted, so
that one run reports every failure, not the first."""

import time

results = {"passed": 0, "failed": 0}


def check(what, condition, detail=""):
    if condition:
        results["passed"] += 1
        print("PASS", what)
    else:
        results["failed"] += 1
        print("FAIL", what, detail)


def eventually(predicate, seconds=15):
    deadline = time.monotonic() + seconds
    while True:
        value = predicate()
        if value or time.monotonic() > deadline:
            return value
        time.sleep(0.2)
