#!/usr/bin/env python3
"""Runs a command against a real node: `with_node.py LABEL [--set k=v ...] --
COMMAND...`, where {base} and {token} in COMMAND become the node's API URL
and token. Exits with the command's code; the node's log is printed on
failure."""

import subprocess
import sys

from taskmill_node import running_node


def main(argv):
    label, rest = argv[0], argv[1:]
    split = rest.index("--")
    options = [rest[i + 1] for i in range(0, split, 2) if rest[i] == "--set"]
    command = rest[split + 1:]
    token = "openapi-check-token"
    with running_node(label, token=token, options=options) as node:
        code = subprocess.call([a.replace("{base}", node.base).replace("{token}", token)
                                for a in command])
        if code != 0:
            with open(node.log) as log:
                print("--- the node's log (%s), last lines:" % node.log)
                print("".join(log.readlines()[-40:]))
        return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
