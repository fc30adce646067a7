"""The README's Python API snippet runs as written on the default model (e2e), and its generate() lines
print the generated text: the text the tokenizer decodes from the new ids, not a Generation object."""

from __future__ import annotations

import re
from pathlib import Path

import txviz.loading

README = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")


def python_api_snippet() -> str:
    section = README.split("## Python API", 1)[1]
    return re.search(r"```python\n(.*?)```", section, re.S)[1]


def test_the_python_api_snippet_runs_and_prints_the_generated_text(default_model, monkeypatch, capsys):
    from txviz.generate import generate

    monkeypatch.setattr(txviz.loading, "load", lambda *args, **kwargs: default_model)  # the session's load
    exec(compile(python_api_snippet(), "README.md", "exec"), {})
    printed = capsys.readouterr().out.strip()
    tokenizer = default_model.tokenizer
    import torch
    expected = generate(default_model.model, torch.tensor(tokenizer.encode("The capital of France is", bos="none").ids), 8)
    assert printed and printed == tokenizer.decode(expected.new_ids, skip_special=True).strip()
