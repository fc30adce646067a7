"""The memory calculator on configs whose layers differ (Llama 4's chunked and global layers, Jamba's Mamba
layers) and on configs with keys no reader understood: the warnings name the keys and follow each new
upload; the per-layer-type table holds each kind's bytes, written out from the published config."""

from __future__ import annotations

import json

from tests.helpers import published_geometry_configs as pub
from tests.helpers import published_hf_configs as hf
from tests.helpers.apptest import no_errors, open_at
from app.ui.widgets import plain
from txviz.loading.zoo import SHIPPED_ZOO

BF16 = 2


def calculator():
    at = open_at("kv_cache", str(SHIPPED_ZOO / "base"), "Mary had a red kite.", timeout=300,
                 state={"mem_source": "Your config.json"})
    no_errors(at)
    return at


def upload(at, config: dict):
    uploader = next(u for u in at.get("file_uploader") if u.key == "mem_upload")
    uploader.set_value(("config.json", json.dumps(config).encode(), "application/json")).run()
    no_errors(at)
    return at


def ignored_warnings(at) -> list[str]:
    return [w.value for w in at.warning if "leave out" in w.value]


def layer_table(at) -> dict[str, dict]:
    frames = [d.value for d in at.dataframe if "without positions" in d.value.columns]
    return {row["type"]: row for frame in frames for _, row in frame.iterrows()}


def test_the_warnings_name_each_unread_key_and_follow_the_upload():
    at = upload(calculator(), {**hf.LLAMA_3_8B, "num_memory_tokens": 64})
    (warning,) = ignored_warnings(at)
    assert plain("`num_memory_tokens` ignored") in warning
    at = upload(at, {**pub.QWEN3_NEXT_80B, "linear_num_extra_heads": 8})
    (warning,) = ignored_warnings(at)
    assert plain("`linear_num_extra_heads` ignored") in warning and "num_memory_tokens" not in warning
    at = upload(at, pub.QWEN3_NEXT_80B)  # the published config: every key understood, no warning left
    assert ignored_warnings(at) == []
    at = upload(at, {**hf.LLAMA_3_8B, "model_type": "acme_lm", "mamba_d_state": 16})
    assert any(w.value.startswith("Read by txviz's generic rule") for w in at.warning)
    (warning,) = ignored_warnings(at)
    assert plain("`mamba_d_state` ignored") in warning
    next(r for r in at.radio if r.key == "mem_source").set_value("Preset").run()  # a preset: nothing left unread
    no_errors(at)
    assert ignored_warnings(at) == [] and not any(w.value.startswith("Read by txviz's generic rule") for w in at.warning)


def test_llama4_shows_its_chunked_and_global_layers_with_their_bytes():
    at = upload(calculator(), pub.LLAMA_4_SCOUT)
    rows = layer_table(at)
    chunked, full = rows["chunked_attention"], rows["full_attention"]
    per_layer = 2 * 8 * 128 * BF16
    assert (chunked["layers"], chunked["window or chunk"], chunked["without positions"]) == (36, 8192, 0)
    assert (full["layers"], full["without positions"]) == (12, 12)
    assert chunked["KV bytes/token (bf16)"] == 36 * per_layer and full["KV bytes/token (bf16)"] == 12 * per_layer
    at_column = next(c for c in chunked.index if c.startswith("bytes at "))
    tokens = int(at_column.split()[2].replace(",", ""))
    assert chunked[at_column] == 36 * min(tokens, 8192) * per_layer and full[at_column] == 12 * tokens * per_layer
    caption = " ".join(c.value for c in at.caption)
    assert "36 chunked layers (window 8,192) + 12 global layers without positions" in caption
    said = next(m.value for m in at.markdown if "What each kind of layer keeps" in m.value)
    assert plain("12 global layers without positions grow by 48.0 KiB per token") in said


def test_jamba_shows_its_fixed_state_and_the_table_goes_with_a_uniform_model():
    at = upload(calculator(), pub.JAMBA_1_5_MINI)
    state = 28 * 8192 * (4 + 16) * BF16
    assert layer_table(at)["mamba"]["fixed state bytes/sequence"] == state
    assert {m.label: m.value for m in at.metric}["Fixed state per sequence"] == f"{state / 2**20:.1f} MiB"
    at = upload(at, hf.LLAMA_3_8B)
    assert layer_table(at) == {} and "Fixed state per sequence" not in {m.label for m in at.metric}


def test_gpt_oss_says_its_sinks_are_parameters_without_kv():
    at = upload(calculator(), pub.GPT_OSS_120B)
    assert "64 attention sinks per layer (parameters, no KV)" in " ".join(c.value for c in at.caption)
    rows = layer_table(at)
    assert (rows["sliding_attention"]["layers"], rows["sliding_attention"]["window or chunk"]) == (18, 128)
    assert rows["full_attention"]["KV bytes/token (bf16)"] == 18 * 2 * 8 * 64 * BF16
