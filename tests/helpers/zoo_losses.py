"""The shipped zoo's held-out windows and each window's loss, scored once per test process: the lab's
check that they rebuild eval.json and the README's MHA/GQA/MQA figures read the same scoring (those tests
are one xdist group, ``GROUP``, so they run in one process). The held-out token stream is encoded once per
tokenizer and process too (``val_stream``): the shipped variants share one tokenizer, and encoding the
400 held-out stories took ~0.17 CPU s in each lab test that reads a prefix of it and each variant
``held_out`` loads. ``held_out_windows`` itself, the page's, is held to eval.json's window count and
first losses in tests/app/services/test_zoo.py."""

from __future__ import annotations

from functools import lru_cache
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

GROUP = "zoo-window-losses"


@lru_cache(maxsize=None)
def held_out(name: str):
    """(the shipped variant ``name``, its held-out windows): the two steps of
    ``txviz.lab.data.held_out_windows`` (the Design tradeoffs page's), the stream encoded once per
    tokenizer (``val_stream``) instead of once per variant (the MoE finding alone loads four)."""
    import torch

    from txviz.lab.data import LabData
    from txviz.lab.zoo import CORPUS
    from txviz.loading import load
    from txviz.loading.zoo import SHIPPED_ZOO

    loaded = load(SHIPPED_ZOO / name, device="cpu")
    backend = loaded.tokenizer.backend
    data = LabData(CORPUS, backend, torch.empty(0, dtype=torch.long), val_stream(backend))
    return loaded, data.val_windows(loaded.config.max_seq_len)


def val_stream(backend) -> torch.Tensor:
    """(N,) the shipped corpus's held-out stories encoded with the tokenizer ``backend`` (a
    ``tokenizers.Tokenizer``), as evaluate() reads them: each story opened by the separator."""
    key = backend.to_str()  # the tokenizer's whole definition: two variants share a stream only if equal
    if key not in _VAL_STREAMS:
        import torch

        from txviz.lab.corpus import stories
        from txviz.lab.tokenizer import encode_stream
        from txviz.lab.zoo import CORPUS

        _VAL_STREAMS[key] = torch.tensor(encode_stream(backend, stories("val", CORPUS)))
    return _VAL_STREAMS[key]


_VAL_STREAMS: dict[str, torch.Tensor] = {}


@lru_cache(maxsize=None)
def window_losses(name: str) -> torch.Tensor:
    """(W,) the mean next-token loss of each held-out window, scored now with the shipped weights."""
    from txviz.lab.evaluate import window_losses as score

    loaded, windows = held_out(name)
    return score(loaded.model, windows)
