"""A real server with many short-lived sessions (bare websockets, tests/helpers/ws_session.py): what they
leave behind stays within the budgets the operator set.

- Visitors with prompts of their own come and go: the server grows by at most the shared trace store
  (TXVIZ_TRACE_CACHE_BYTES), not a trace per visitor. Their sessions stay stored for far longer than the
  test (as a real server's do for two minutes, and longer than that for Streamlit's download functions),
  so anything a session held of its trace would show here.
- The upload route refuses a file over the app's 1 MiB cap, and a session that sends many files keeps
  only its newest few (app/ui/server_files.py).

The RSS numbers are printed; run with ``-s`` to see them.
"""

from __future__ import annotations

import psutil
import pytest

from tests.helpers.ws_session import REFUSED_WHILE_SENDING, upload, uploaded_bytes, ws_session

pytestmark = [pytest.mark.default_model]

MIB = 1 << 20
TRACE_STORE = 48 * MIB
WARM_UP, N_VISITORS = 2, 6
WORDS = "amber birch cedar delta ember fjord grove harbor island jasper kettle lantern meadow north".split()


@pytest.fixture(scope="module")
def app_server(default_model_home):
    """The app with a small trace store, sessions stored 10 minutes after they leave, and no XSRF check on
    the upload route (this test is the client that would hold the cookie). glibc's malloc gets a fixed mmap
    threshold: by default it raises the threshold past a freed large block, so a later trace of the same size
    comes from the heap and its memory stays in RSS once freed (+94 and +201 MiB over 6 visitors measured so,
    with every trace but the store's freed); mapped, a freed trace leaves RSS."""
    from tests.helpers.browser import streamlit_server

    env = {"TXVIZ_HOME": str(default_model_home), "TXVIZ_TRACE_CACHE_BYTES": str(TRACE_STORE),
           "STREAMLIT_SERVER_DISCONNECTED_SESSION_TTL": "600", "STREAMLIT_SERVER_ENABLE_XSRF_PROTECTION": "false",
           "MALLOC_MMAP_THRESHOLD_": str(128 << 10)}
    with streamlit_server(env=env) as url:
        yield url


def _prompt(i: int) -> str:
    """About 150 tokens of this visitor's own (every head's map of them: ~24 MiB in float32)."""
    return f"Visitor {i} writes: " + " ".join(f"{WORDS[(i + j) % len(WORDS)]}{(j * (i + 5)) % 89}" for j in range(45))


def _visit(url: str, i: int) -> None:
    from urllib.parse import quote

    with ws_session(url, "attention", "prompt=" + quote(_prompt(i))) as (run, _):
        assert run.session_id and not run.exceptions, run.exceptions


def test_visitors_who_leave_keep_the_server_within_its_trace_store(app_server):
    process = psutil.Process(app_server.pid)
    for i in range(WARM_UP):  # the page's code paths, the allocator's arenas, and a full trace store
        _visit(app_server, i)
    before = process.memory_info().rss
    after_each = []
    for i in range(WARM_UP, WARM_UP + N_VISITORS):
        _visit(app_server, i)
        after_each.append(process.memory_info().rss)
    growth = after_each[-1] - before
    print(f"\nserver RSS {before / MIB:.0f} MiB after {WARM_UP} visitors, then after each of {N_VISITORS} more: "
          f"{[round(x / MIB) for x in after_each]} MiB ({growth / MIB:+.0f} MiB; trace store {TRACE_STORE / MIB:.0f} MiB)")
    # the store was full before: a trace held per session would add ~24 MiB per visitor (~145 MiB here)
    assert growth < TRACE_STORE, f"the server grew by {growth / MIB:.0f} MiB over {N_VISITORS} visitors"


def test_the_upload_route_refuses_a_file_over_the_cap_and_a_session_keeps_its_newest(app_server):
    from app.ui.server_files import UPLOADS_PER_SESSION

    with ws_session(app_server, "kv-cache") as (run, rerun):
        assert upload(app_server, run.session_id, b"{" + b" " * MIB + b"}") in (413, REFUSED_WHILE_SENDING)  # over 1 MiB
        before = uploaded_bytes(app_server)
        file = b"{" + b" " * (900 << 10) + b"}"
        assert all(upload(app_server, run.session_id, file) == 204 for _ in range(12))
        assert not rerun().exceptions
        held = uploaded_bytes(app_server) - before
    assert held <= UPLOADS_PER_SESSION * len(file), f"the session's uploads hold {held / MIB:.1f} MiB"
