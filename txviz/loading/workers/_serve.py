"""The protocol every worker speaks: say it is ready, cap this process, read one JSON request, write one
JSON reply. A worker imports what it needs at the top, before ``serve``: the parent's clock starts at READY.

A worker's ``handle(request) -> dict`` may raise ``Refused`` for a clear refusal; any other exception
(MemoryError included) becomes ``{"error": ..., "kind": ...}`` on stdout, so the parent reads a reason,
not a traceback.
"""

from __future__ import annotations

import json
import resource
import sys


class Refused(Exception):
    """The input is not acceptable; the message says why."""


def _cap(limits: dict) -> None:
    with open("/proc/self/statm") as statm:  # the interpreter's own mapping, so the budget is on top of it
        mapped = int(statm.read().split()[0]) * resource.getpagesize()
    address_space = mapped + int(limits["memory_bytes"])
    resource.setrlimit(resource.RLIMIT_AS, (address_space, address_space))
    cpu = max(1, int(limits["cpu_seconds"]) + 1)
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu))


READY = b"\n"  # txviz.loading.isolated starts the work's clock when it reads this


def serve(handle) -> None:
    sys.stdout.buffer.write(READY)  # imports done: the parent's wall clock starts now, then it sends the request
    sys.stdout.buffer.flush()
    message = json.loads(sys.stdin.buffer.read())
    _cap(message["limits"])
    try:
        reply = handle(message["request"])
    except Refused as refusal:
        reply = {"error": str(refusal), "kind": "refused"}
    except MemoryError:
        reply = {"error": "the work needed more memory than its limit", "kind": "memory"}
    except RecursionError:
        reply = {"error": "the work nested too deeply", "kind": "refused"}
    except BaseException as error:  # noqa: BLE001 - a Rust panic is a BaseException; all become a reason
        reply = {"error": f"{type(error).__name__}: {str(error)[:300]}", "kind": "refused"}
    sys.stdout.write(json.dumps(reply))
