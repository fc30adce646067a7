"""A tokenizer.json larger than any published one is refused unread, by the loader and by the discovery
check (txviz.loading.tokenizer.tokenizer.MAX_TOKENIZER_JSON_BYTES): tokenizers would parse it in the server's own
process at several times its size in memory."""

from __future__ import annotations

import os
import shutil

import pytest

from txviz.loading import load, preflight
from txviz.loading.errors import ModelLoadError
from txviz.loading.tokenizer.tokenizer import MAX_TOKENIZER_JSON_BYTES
from txviz.loading.zoo import SHIPPED_ZOO


@pytest.fixture
def directory(tmp_path):
    preflight.forget()
    yield shutil.copytree(SHIPPED_ZOO / "base", tmp_path / "base")
    preflight.forget()


def test_a_tokenizer_json_past_the_cap_is_refused_by_load_and_by_the_sidebar_check(directory):
    assert preflight.problem(directory) is None and load(directory).tokenizer is not None
    preflight.forget()
    tokenizer = directory / "tokenizer.json"
    os.truncate(tokenizer, MAX_TOKENIZER_JSON_BYTES + 1)  # sparse: the file's size, no disk or memory used
    with pytest.raises(ModelLoadError, match="MiB is refused unread"):  # zeros: parsed, they would fail as JSON
        load(directory)
    verdict = preflight.problem(directory)
    assert verdict and "MiB is refused unread" in verdict and str(tokenizer) in verdict


def test_the_cap_is_the_boundary(directory, monkeypatch):
    import txviz.loading.tokenizer.tokenizer as tokenizer_module

    size = (directory / "tokenizer.json").stat().st_size
    monkeypatch.setattr(tokenizer_module, "MAX_TOKENIZER_JSON_BYTES", size)
    assert tokenizer_module.tokenizer_json_too_large(directory / "tokenizer.json") is None
    monkeypatch.setattr(tokenizer_module, "MAX_TOKENIZER_JSON_BYTES", size - 1)
    assert "refused unread" in tokenizer_module.tokenizer_json_too_large(directory / "tokenizer.json")
