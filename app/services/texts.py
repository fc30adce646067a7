"""The license-clean texts the project ships (assets/texts), as text and as a model's token ids."""

from __future__ import annotations

from pathlib import Path

import torch

from txviz.loading.loaded import LoadedModel

TEXTS_DIR = Path(__file__).resolve().parents[2] / "assets" / "texts"


def shipped_texts() -> dict[str, str]:
    """The shipped texts by file name."""
    return {p.stem: p.read_text(encoding="utf-8") for p in sorted(TEXTS_DIR.glob("*.txt"))}


def shipped_text_ids(loaded: LoadedModel, text_name: str, max_tokens: int) -> torch.Tensor:
    """The first ``max_tokens`` tokens of a shipped text, after the sink token when the model has one."""
    tokenizer = loaded.tokenizer
    bos = "sink" if tokenizer.sink_id is not None else "none"
    ids = tokenizer.encode(shipped_texts()[text_name], bos=bos).ids
    return torch.tensor(ids[:min(max_tokens, loaded.config.max_seq_len)])
