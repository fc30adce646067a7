"""The Tradeoffs page's MHA / GQA / MQA tab on any uploaded config.json (txviz.geometry): the three
kinds' KV bytes for a model txviz cannot run, worked out by hand from its published config."""

from __future__ import annotations

import json

from markdown_it import MarkdownIt

from tests.helpers import published_geometry_configs as pub
from tests.helpers import published_hf_configs as hf
from tests.helpers.apptest import no_errors, open_at
from app.ui.widgets import plain
from txviz.loading.zoo import SHIPPED_ZOO


def kinds_tab():
    at = open_at("tradeoffs", str(SHIPPED_ZOO / "base"), "Mary had a red kite.", timeout=300,
                 state={"tradeoffs_tab": "MHA / GQA / MQA"})
    no_errors(at)
    return at


def upload(at, config: dict):
    uploader = next(u for u in at.get("file_uploader") if u.key == "to_kinds_upload")
    uploader.set_value(("config.json", json.dumps(config).encode(), "application/json")).run()
    return at


def kinds_table(at) -> dict[str, tuple[int, int]]:
    frame = next(d.value for d in at.dataframe if "KV bytes/token (bf16)" in d.value.columns)
    return {row["kind"]: (row["KV heads"], row["KV bytes/token (bf16)"]) for _, row in frame.iterrows()}


def test_any_config_gets_the_three_kinds_and_mla_says_what_it_keeps():
    at = upload(kinds_tab(), pub.GEMMA_3_270M)
    no_errors(at)
    assert kinds_table(at) == {"MHA": (4, 18 * 2 * 4 * 256 * 2), "GQA": (2, 18 * 2 * 2 * 256 * 2),
                               "MQA": (1, 18 * 2 * 1 * 256 * 2)}
    at = upload(at, pub.DEEPSEEK_V3)
    no_errors(at)
    assert any(f"keeps {512 + 64} numbers per token and layer" in i.value for i in at.info)
    at = upload(at, {**hf.LLAMA_3_8B, "model_type": "acme_lm"})
    no_errors(at)
    assert any(plain("'acme_lm' is not one txviz knows") in w.value for w in at.warning)
    assert kinds_table(at)["GQA"] == (8, 32 * 2 * 8 * 128 * 2)


def test_an_uploaded_name_and_its_warnings_are_shown_as_written_not_as_markdown():
    """As on the KV page: the name, the kind and the warnings come from the upload."""
    hostile = "<img src=x onerror=alert(1)> **bold** [link](www.example.com)"  # no "/": the name is its last part
    at = upload(kinds_tab(), {**hf.LLAMA_3_8B, "_name_or_path": f"org/{hostile}", "model_type": "[acme](http://z)"})
    no_errors(at)
    [line] = [c.value for c in at.caption if "query heads and" in c.value]
    assert line.startswith(f"**{plain(hostile)}") and "1 KV head " not in line and "8 KV heads" in line
    for markdown in [line, *(w.value for w in at.warning)]:
        rendered = MarkdownIt("commonmark").render(markdown)
        assert "<a " not in rendered and "<img" not in rendered and rendered.count("<strong>") <= 1, rendered


def test_unread_keys_and_each_kind_of_layer_are_shown_and_follow_the_upload():
    at = upload(kinds_tab(), {**pub.JAMBA_1_5_MINI, "mamba_n_groups": 8})
    no_errors(at)
    warnings = [w.value for w in at.warning if "leave out" in w.value]
    assert len(warnings) == 1 and plain("`mamba_n_groups` ignored") in warnings[0]
    layers = {row["type"]: row for d in at.dataframe if "without positions" in d.value.columns
              for _, row in d.value.iterrows()}
    assert layers["mamba"]["fixed state bytes/sequence"] == 28 * 8192 * (4 + 16) * 2
    assert layers["full_attention"]["KV bytes/token (bf16)"] == 4 * 2 * 8 * 128 * 2
    assert kinds_table(at)["GQA"] == (8, 4 * 2 * 8 * 128 * 2)  # only the attention layers keep K and V
    assert any("on 32 layers, of which 4 keep K and V." in c.value for c in at.caption)
    at = upload(at, pub.JAMBA_1_5_MINI)
    no_errors(at)
    assert not [w.value for w in at.warning if "leave out" in w.value]
