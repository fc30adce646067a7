"""The sidebar's Hub box, against a Hub on 127.0.0.1 (tests/helpers/hub_server.py): off unless the
operator's TXVIZ_HUB allows it (a link naming a Hub id is refused too), and, allowed, an id typed there
is downloaded and loaded, its commit kept in the URL; the box follows the URL's model."""

from __future__ import annotations

import pytest

from tests.helpers.apptest import app_on, no_errors, shown
from tests.helpers.hub_server import HubServer
from tests.helpers.tiny_hf import save_llama_with_tokenizer
from txviz.loading.zoo import SHIPPED_ZOO

pytestmark = [pytest.mark.transformers,
              pytest.mark.skipif(not (SHIPPED_ZOO / "alibi" / "eval.json").is_file(), reason="the zoo is not trained")]
HUB = "Hugging Face Hub…"


@pytest.fixture
def hub(tmp_path, monkeypatch):
    import streamlit as st

    for name in ("HF_HUB_OFFLINE", "HF_HUB_CACHE", "HF_TOKEN", "TXVIZ_HUB", "TXVIZ_HUB_MAX_DOWNLOAD",
                 "TXVIZ_HUB_MAX_MEMORY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf_home"))
    st.cache_resource.clear()
    with HubServer() as server:
        monkeypatch.setenv("HF_ENDPOINT", server.url)
        server.commit = server.publish("org/tiny", save_llama_with_tokenizer(tmp_path / "ckpt"))
        yield server
    st.cache_resource.clear()


def test_off_unless_the_operator_allows_it(hub):
    at = app_on(str(SHIPPED_ZOO / "alibi")).run()
    no_errors(at)
    assert HUB not in at.sidebar.selectbox(key="model_choice").options
    at = app_on(f"org/tiny@{hub.commit}").run()
    assert any("Hub ids are off here: the operator allows them with TXVIZ_HUB" in shown(e.value) for e in at.error)
    assert hub.requests == []


def test_a_typed_id_is_downloaded_and_pinned_in_the_url(hub, monkeypatch):
    monkeypatch.setenv("TXVIZ_HUB", "org/*")
    at = app_on(str(SHIPPED_ZOO / "alibi")).run()
    no_errors(at)
    at.sidebar.selectbox(key="model_choice").set_value(HUB).run()
    at.sidebar.text_input(key="hub_id").input("org/tiny").run()
    no_errors(at)
    assert at.session_state["model"] == f"org/tiny@{hub.commit}"
    assert at.query_params["model"] == f"org/tiny@{hub.commit}"
    assert "hf · 0.1 M params" in at.sidebar.caption[0].value  # the tiny llama is what is loaded
    assert hub.fetched("model.safetensors") == 1
    linked = app_on(f"org/tiny@{hub.commit}").run()  # the link in a new session: same weights, no download
    no_errors(linked)
    assert linked.sidebar.selectbox(key="model_choice").value == HUB
    assert linked.sidebar.text_input(key="hub_id").value == f"org/tiny@{hub.commit}"
    assert hub.fetched("model.safetensors") == 1
