"""The memory calculator and the Tradeoffs kinds table show what the library now knows: an uploaded
model's published quantization (it opens at it), the KV rate inside and past the sliding windows, the
MHA/GQA/MQA what-if's own parameters, and small counts and byte sizes as a person reads them. Every
number is arithmetic on the published config (tests/helpers/published_*_configs.py)."""

from __future__ import annotations

import json

from tests.helpers import published_geometry_configs as pub
from tests.helpers import published_hf_configs as hf
from tests.helpers.apptest import no_errors, open_at
from txviz.loading.zoo import SHIPPED_ZOO

GIB = 1 << 30
ZOO_BASE = str(SHIPPED_ZOO / "base")
# a config one layer of one head of width one: two elements per token, 4 bytes in bf16
SPECK = {**hf.LLAMA_3_8B, "hidden_size": 1, "intermediate_size": 1, "num_attention_heads": 1, "num_hidden_layers": 1,
         "num_key_value_heads": 1, "vocab_size": 2, "_name_or_path": "speck"}


def widget(at, kind: str, key: str):
    return next(w for w in at.get(kind) if w.key == key)


def metrics(at) -> dict[str, str]:
    return {m.label: m.value for m in at.metric}


def captions(at) -> str:
    return " ".join(c.value for c in at.caption)


def calculator(state: dict | None = None):
    at = open_at("kv_cache", ZOO_BASE, "Mary had a red kite.", timeout=300, state=state)
    no_errors(at)
    return at


def upload(at, config: dict, key: str = "mem_upload"):
    uploader = next(u for u in at.get("file_uploader") if u.key == key)
    uploader.set_value(("config.json", json.dumps(config).encode(), "application/json")).run()
    no_errors(at)
    return at


def test_a_quantized_upload_opens_at_its_published_format_and_the_next_model_does_not():
    at = upload(calculator({"mem_source": "Your config.json"}), pub.GPT_OSS_120B)
    weights = widget(at, "selectbox", "mem_weight_dtype")
    assert weights.value == "as published" and weights.options[0] == "as published"
    assert any("routed experts quantized" in i.value for i in at.info)  # the assumption, shown
    assert metrics(at)["Longest context that fits (all three)"] not in ("none",)  # 80 GiB holds ~61 GiB of weights
    weights.set_value("bf16").run()
    assert metrics(at)["Longest context that fits (all three)"] == "none"  # 218 GiB in bf16
    upload(at, hf.LLAMA_3_8B)
    weights = widget(at, "selectbox", "mem_weight_dtype")
    assert weights.value == "bf16" and "as published" not in weights.options
    upload(at, pub.DEEPSEEK_V3_FP8)
    assert widget(at, "selectbox", "mem_weight_dtype").value == "as published"  # a new quantized model: its own


def test_a_windowed_model_shows_the_rate_past_its_windows():
    at = upload(calculator({"mem_source": "Your config.json"}), pub.GEMMA_3_27B_IT)
    shown = metrics(at)
    assert shown["KV bytes per token (GQA)"] == f"{62 * 2 * 16 * 128 * 2 / 1024:,.1f} KiB"  # 496.0 KiB
    assert shown["Past 1,024 tokens, per token"] == f"{10 * 2 * 16 * 128 * 2 / 1024:,.1f} KiB"  # 10 global layers
    upload(at, hf.LLAMA_3_8B)
    assert not any(label.startswith("Past ") for label in metrics(at))  # no window, no second rate


def test_the_mha_what_if_counts_its_kv_projections_in_the_weights():
    at = calculator()
    widget(at, "segmented_control", "mem_kind").set_value("MHA").run()
    no_errors(at)
    extra = 32 * 2 * 4096 * 128 * (32 - 8)
    assert f"{(8_030_261_248 + extra) / 1e9:,.2f} B parameters: +{extra / 1e9:,.2f} B" in captions(at)
    assert f"weights {2 * (8_030_261_248 + extra) / GIB:,.2f} GiB" in captions(at)
    widget(at, "segmented_control", "mem_kind").set_value("GQA").run()
    assert "in the K and V projections" not in captions(at)
    assert f"weights {2 * 8_030_261_248 / GIB:,.2f} GiB" in captions(at)


def test_a_tiny_model_is_said_in_bytes_and_singular_counts():
    at = upload(calculator({"mem_source": "Your config.json"}), SPECK)
    assert metrics(at)["KV bytes per token (MHA)"] == "4 B"
    assert "MHA: 1 layer, 1 query head, 1 KV head" in captions(at)
    assert "1 layer × 1" in captions(at) and "1 layers" not in captions(at)  # in the name given to the upload


def test_the_tradeoffs_kinds_table_has_the_window_and_the_rate_past_it():
    at = open_at("tradeoffs", ZOO_BASE, "Mary had a red kite.", timeout=300, state={"tradeoffs_tab": "MHA / GQA / MQA"})
    upload(at, pub.GEMMA_3_27B_IT, "to_kinds_upload")
    frame = [d.value for d in at.dataframe if "window" in d.value.columns][-1]  # the upload's, below the loaded model's
    rows = {row["kind"]: row for _, row in frame.iterrows()}
    assert set(rows) == {"MHA", "GQA", "MQA"}
    n_params = rows["GQA"]["params"]
    for kind, kv_heads in (("MHA", 32), ("GQA", 16), ("MQA", 1)):
        row = rows[kind]
        assert row["window"] == "1,024 on 52 of 62 layers"
        assert row["KV bytes/token (bf16)"] == 62 * 2 * kv_heads * 128 * 2
        assert row["KV bytes/token past the window (bf16)"] == 10 * 2 * kv_heads * 128 * 2
        assert row["params"] == n_params + 62 * 2 * 5376 * 128 * (kv_heads - 16)


def test_an_unreadable_upload_is_named_and_the_size_limit_is_in_the_label():
    """A larger file the browser refuses is never sent, so the error of the file before stays on screen:
    it names that file, and the limit is in the label instead of only in a hover."""
    at = calculator({"mem_source": "Your config.json"})
    uploader = next(u for u in at.get("file_uploader") if u.key == "mem_upload")
    assert uploader.label.endswith("(at most 1 MiB)")
    uploader.set_value(("broken.json", b"{not json", "application/json")).run()
    assert [e.value.split(":")[0] for e in at.error] == ["Could not read broken\\.json"]


def test_a_chosen_weight_dtype_survives_a_model_change_unless_the_new_model_is_published_quantized():
    from txviz.analysis.kv.presets import PRESETS

    at = calculator()
    widget(at, "selectbox", "mem_weight_dtype").set_value("int4").run()
    for key, expected in (("mistral-7b-v0.1", "int4"), ("deepseek-v3", "as published"), ("llama-3-8b", "bf16")):
        widget(at, "selectbox", "mem_preset").set_value(PRESETS[key]["name"]).run()
        no_errors(at)
        assert widget(at, "selectbox", "mem_weight_dtype").value == expected, key
