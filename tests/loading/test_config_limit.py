"""The config.json size limit is handed to the readers, not read from the environment inside them: a
reader applies the limit it is given, and the entry points (load(), ``txviz memory --config``) hand in
TXVIZ_MAX_CONFIG_BYTES, so a smaller setting still refuses a larger file unread."""

from __future__ import annotations

import json

import pytest

from tests.helpers.published_hf_configs import LLAMA_3_8B
from txviz.geometry import read_config
from txviz.loading import load
from txviz.loading.errors import ModelLoadError
from txviz.loading.hf.config import MAX_CONFIG_BYTES, parse_config_json, read_hf_config

TEXT = json.dumps(LLAMA_3_8B)


def test_a_reader_applies_the_limit_it_is_handed_not_the_environment(monkeypatch):
    monkeypatch.setenv("TXVIZ_MAX_CONFIG_BYTES", "16")  # a setting the reader must not look at
    raw, _ = parse_config_json(TEXT, max_bytes=len(TEXT))
    assert raw == LLAMA_3_8B
    assert read_hf_config(TEXT).n_layers == LLAMA_3_8B["num_hidden_layers"]  # the default limit: 1 MiB
    with pytest.raises(ModelLoadError, match=f"limit {len(TEXT) - 1}"):
        parse_config_json(TEXT, max_bytes=len(TEXT) - 1)
    assert MAX_CONFIG_BYTES == 1 << 20


def test_the_entry_points_hand_in_the_setting(tmp_path, monkeypatch):
    (tmp_path / "config.json").write_text(TEXT)
    (tmp_path / "model.safetensors").write_bytes(b"")  # never reached: the config is refused first
    monkeypatch.setenv("TXVIZ_MAX_CONFIG_BYTES", str(len(TEXT) - 1))
    with pytest.raises(ModelLoadError, match=f"too large for a config.json \\(limit {len(TEXT) - 1}"):
        load(tmp_path, device="cpu")
    monkeypatch.setenv("TXVIZ_MAX_CONFIG_BYTES", str(len(TEXT)))
    assert read_config(tmp_path, max_bytes=len(TEXT)).n_layers == LLAMA_3_8B["num_hidden_layers"]
