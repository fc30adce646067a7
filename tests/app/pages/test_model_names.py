"""A model's own name is the name of a folder the user chose: the Positions page's markdown and the
Tradeoffs page's plotly title show it as written (plotly titles render <a>, <b>, <br> tags)."""

from __future__ import annotations

import shutil
from pathlib import Path

from markdown_it import MarkdownIt

from app.ui.widgets import plain
from tests.helpers.apptest import chart, no_errors, open_at

ZOO_BASE = Path(__file__).resolve().parents[3] / "assets" / "zoo" / "base"
NAME = "*my* [model](x.y) <b>bold<br>line"  # no "/": a folder's name


def copied(tmp_path, monkeypatch) -> str:
    shutil.copytree(ZOO_BASE, tmp_path / NAME)
    monkeypatch.setenv("TXVIZ_MODEL_DIRS", str(tmp_path))
    return str(tmp_path / NAME)


def test_positions_page_and_moe_title_show_a_folder_name_as_written(tmp_path, monkeypatch):
    model = copied(tmp_path, monkeypatch)
    at = open_at("positions", model, "Mary had a red kite.")
    no_errors(at)
    [line] = [m.value for m in at.markdown if m.value.startswith("Loaded: ")]
    assert line.startswith(f"Loaded: **{plain(NAME)}**")
    rendered = MarkdownIt("commonmark").render(line)
    assert "<a " not in rendered and "<em>" not in rendered and "<b>" not in rendered, rendered
    at = open_at("tradeoffs", model, "Mary had a red kite.", state={"tradeoffs_tab": "Dense vs MoE"})
    no_errors(at)
    title = chart(at, "to_moe_family")["layout"]["title"]["text"]
    assert title.startswith("*my* [model](x.y) &lt;b&gt;bold&lt;br&gt;line: capacity vs compute"), title
