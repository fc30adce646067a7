"""A zoo model chosen in the sidebar goes into the link by its short form (``zoo:moe_top2``), not by the
absolute path of this checkout: the link opens the same model on another checkout, and an older link's
absolute path opens too and is rewritten to the short form."""

from __future__ import annotations

import shutil

import pytest
import streamlit as st

from app.services import models
from tests.helpers.apptest import app_on, no_errors, pick_model
from txviz.lab.corpus import sample_text
from txviz.loading import sources
from txviz.loading.zoo import SHIPPED_ZOO

pytestmark = pytest.mark.skipif(not (SHIPPED_ZOO / "moe_top2" / "eval.json").is_file(), reason="the zoo is not trained")


@pytest.fixture(autouse=True)
def fresh_models():
    st.cache_resource.clear()  # no model kept under a name another test's zoo gave it
    yield
    st.cache_resource.clear()


@pytest.fixture
def loads(monkeypatch) -> list[str]:
    """The files of every model the app loads, as it loads them."""
    files, load = [], models.load_model

    def recorded(source: str):
        loaded = load(source)
        files.append(loaded.source)
        return loaded

    monkeypatch.setattr(models, "load_model", recorded)
    return files


def chosen(at) -> str:
    return at.sidebar.selectbox(key="model_choice").value


def test_a_picked_zoo_model_is_named_in_the_link_by_its_short_form():
    at = app_on(str(SHIPPED_ZOO / "alibi"), sample_text(3)).run()  # an older link: this checkout's absolute path
    no_errors(at)
    assert chosen(at).startswith("alibi — ")
    assert at.query_params["model"] == "zoo:alibi" == at.session_state["model"]
    pick_model(at, "moe_top2").run()
    no_errors(at)
    assert at.query_params["model"] == "zoo:moe_top2" == at.session_state["model"]
    assert str(SHIPPED_ZOO) not in " ".join(str(v) for v in at.query_params.values())
    assert models.load_model(at.session_state["model"]).source == str((SHIPPED_ZOO / "moe_top2").resolve())


def test_a_short_form_link_opens_that_model(loads):
    at = app_on("zoo:moe_top2", sample_text(3)).run()
    no_errors(at)
    assert chosen(at).startswith("moe_top2 — ") and at.query_params["model"] == "zoo:moe_top2"
    assert set(loads) == {str((SHIPPED_ZOO / "moe_top2").resolve())}


def test_a_short_form_link_opens_on_a_checkout_that_lies_elsewhere(tmp_path, monkeypatch, loads):
    zoo = tmp_path / "elsewhere" / "assets" / "zoo"
    shutil.copytree(SHIPPED_ZOO / "base", zoo / "base")
    monkeypatch.setattr(sources, "SHIPPED_ZOO", zoo)
    at = app_on("zoo:base", sample_text(3)).run()
    no_errors(at)
    assert chosen(at).startswith("base — ") and at.query_params["model"] == "zoo:base"
    assert set(loads) == {str((zoo / "base").resolve())}

