"""The full causal report of one prompt pair, as ``txviz patch --json`` prints it.

For a clean prompt, its counterfactual (same token length) and two words: the logit difference of
both runs, direct logit attribution (txviz.causal.dla), and per head the effect of mean ablation and of
patching from the corrupt run (txviz.causal.patching), beside the attention margin when candidates are
given (txviz.causal.margins), and whether the counterfactual flips the answer at all
(txviz.causal.flip: a ranking by patching means little when it does not). Optionally the attribution-patching estimate and its agreement with exact
patching (txviz.causal.attribution), and the residual grid (txviz.causal.residual).

A seam for test sessions: with ``TXVIZ_CAUSAL_MEMO`` naming a folder, ``measure_pair`` keeps its results
there by input (the model's weights, both prompts' ids, the two tokens, the options), so processes that
measure the same pair (the CLI, the app in-process and in a served browser session) run it once.
"""

from __future__ import annotations

import hashlib
import os
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Sequence

import torch

from txviz.causal.attribution import agreement, attribution_patching
from txviz.causal.dla import LogitAttribution, direct_logit_attribution
from txviz.causal.flip import answer_flip
from txviz.causal.margins import attention_margins
from txviz.causal.metric import answer_tokens
from txviz.causal.pair_runs import PairRuns
from txviz.causal.patching import DEFAULT_CHUNK, ablate_heads, check_same_length, patch_heads
from txviz.causal.residual import residual_grid


def _encode(tokenizer, text: str, bos: str, label: str):
    if not text or not text.strip():
        raise ValueError(f"the {label} prompt is empty")
    return tokenizer.encode(text, bos=bos)


STEPS = ("direct logit attribution", "patching every head", "ablating every head", "attention margins",
         "attribution patching", "the residual grid")  # what measure_pair runs, in order


def measure_pair(model, clean_ids: torch.Tensor, corrupt_ids: torch.Tensor, answer_id: int, wrong_id: int, *,
                 margins: Callable[[], torch.Tensor | None] = lambda: None, attribution: bool = True,
                 grid: bool = False, chunk_size: int = DEFAULT_CHUNK,
                 progress: Callable[[int, int], None] | None = None) -> dict:
    """Every measurement of one prompt pair, in STEPS order, each announced as ``progress(done, total)``:
    {"dla", "patching", "ablation", "margins", "attribution", "grid", "corrupt_diff"} (a step not asked
    for is None). Both ``txviz patch`` and the app's causal page run this. The plain runs of both prompts
    are made once for every step (txviz.causal.pair_runs)."""
    check_same_length(clean_ids, corrupt_ids)
    a, w = answer_id, wrong_id
    runs = PairRuns(model, clean_ids, corrupt_ids)
    steps = {"dla": lambda: direct_logit_attribution(model, clean_ids, a, w),
             "patching": lambda: patch_heads(model, clean_ids, corrupt_ids, a, w, chunk_size=chunk_size,
                                             source=runs.corrupt, clean=runs.clean),
             "ablation": lambda: ablate_heads(model, clean_ids, a, w, value="mean", chunk_size=chunk_size,
                                              clean=runs.clean),
             "margins": margins,
             "attribution": (lambda: attribution_patching(model, clean_ids, corrupt_ids, a, w, source=runs.corrupt))
             if attribution else None,
             "grid": (lambda: residual_grid(model, clean_ids, corrupt_ids, a, w, chunk_size=chunk_size,
                                            source=runs.corrupt, clean=runs.clean)) if grid else None}
    corrupt_diff = lambda: runs.corrupt_diff(a, w)  # noqa: E731
    folder = os.environ.get(MEMO_ENV)
    if not folder:
        return _run_steps(steps, corrupt_diff, progress)
    path = Path(folder) / f"{_memo_key(model, clean_ids, corrupt_ids, a, w, attribution, grid, chunk_size)}.safetensors"
    with _exclusive(path.with_suffix(".lock")):  # a second process measuring the same pair waits, then reads
        kept = _read_kept(path) if path.exists() else None
        if kept is not None:  # every step but the margins (one forward pass, given by the caller) is kept
            steps = {name: step if name == "margins" or step is None else (lambda v=kept[name]: v)
                     for name, step in steps.items()}
        results = _run_steps(steps, corrupt_diff, progress)
        if kept is None:
            _keep(results, path)
    return results


def _run_steps(steps: dict, corrupt_diff: Callable[[], float], progress) -> dict:
    report = progress or (lambda done, total: None)
    results = {}
    for done, (name, step) in enumerate(steps.items()):
        report(done, len(steps))
        results[name] = None if step is None else step()
    report(len(steps), len(steps))
    results["corrupt_diff"] = corrupt_diff()
    return results


MEMO_ENV = "TXVIZ_CAUSAL_MEMO"  # a folder: measure_pair's results kept by input (see the module docstring)
_KEPT = ("patching", "ablation", "attribution", "grid")  # tensors (or None); the DLA is kept part by part


def _keep(results: dict, path: Path) -> None:
    """The results as safetensors (tensors, and the DLA's three numbers as exact text), written whole."""
    from safetensors.torch import save_file

    dla = results["dla"]
    tensors = {"dla.heads": dla.heads, "dla.mlps": dla.mlps,
               **{name: results[name] for name in _KEPT if results[name] is not None}}
    numbers = {f"dla.{name}": repr(float(getattr(dla, name))) for name in ("total", "embed", "bias")}
    partial = path.with_suffix(".partial")
    save_file({k: v.detach().contiguous() for k, v in tensors.items()}, str(partial), metadata=numbers)
    os.replace(partial, path)


def _read_kept(path: Path) -> dict:
    from safetensors import safe_open

    with safe_open(str(path), framework="pt") as stored:
        tensors = {name: stored.get_tensor(name) for name in stored.keys()}
        numbers = {name: float(value) for name, value in stored.metadata().items()}
    dla = LogitAttribution(total=numbers["dla.total"], embed=numbers["dla.embed"], bias=numbers["dla.bias"],
                           heads=tensors["dla.heads"], mlps=tensors["dla.mlps"])
    return {"dla": dla, **{name: tensors.get(name) for name in _KEPT}}


@torch.no_grad()
def _memo_key(model, clean_ids, corrupt_ids, *options) -> str:
    """The inputs' digest: the weights by each tensor's shape, sum and absolute sum (float64), the ids."""
    exact = lambda t: t if t.is_floating_point() else t.double()  # noqa: E731  (float64 sums of any dtype)
    weights = [(name, tuple(t.shape), float(exact(t).sum(dtype=torch.float64)),
                float(exact(t).abs().sum(dtype=torch.float64))) for name, t in model.state_dict().items()]
    inputs = (repr(model.config), weights, clean_ids.tolist(), corrupt_ids.tolist(), options)
    return hashlib.sha256(repr(inputs).encode()).hexdigest()[:32]


@contextmanager
def _exclusive(lock: Path):
    import fcntl

    lock.parent.mkdir(parents=True, exist_ok=True)
    with open(lock, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)  # released when the file closes, an exception included
        yield


def _head_rows(dla, ablation, patching, margins, estimate) -> list[dict]:
    n_layers, n_heads = dla.heads.shape
    rows = []
    for layer in range(n_layers):
        for head in range(n_heads):
            row = {"layer": layer, "head": head, "dla": float(dla.heads[layer, head]),
                   "ablation": float(ablation[layer, head]), "patching": float(patching[layer, head]),
                   "attention_margin": None if margins is None else float(margins[layer, head])}
            if estimate is not None:
                row["attribution"] = float(estimate[layer, head])
            rows.append(row)
    return rows


def patch_report(model, tokenizer, clean: str, corrupt: str, answer: str, wrong: str, *, bos: str = "none",
                 candidates: Sequence[str] | None = None, pronoun: str = "it", attribution: bool = True,
                 grid: bool = False, top_k: int = 10, chunk_size: int = DEFAULT_CHUNK,
                 progress: Callable[[int, int], None] | None = None) -> dict:
    clean_enc, corrupt_enc = _encode(tokenizer, clean, bos, "clean"), _encode(tokenizer, corrupt, bos, "corrupt")
    tokens = answer_tokens(tokenizer, answer, wrong)
    clean_ids, corrupt_ids = torch.tensor(list(clean_enc.ids)), torch.tensor(list(corrupt_enc.ids))
    margin_of = ((lambda: attention_margins(model, clean_enc, clean, pronoun, candidates, answer)) if candidates
                 else (lambda: None))
    results = measure_pair(model, clean_ids, corrupt_ids, tokens.answer_id, tokens.wrong_id, margins=margin_of,
                           attribution=attribution, grid=grid, chunk_size=chunk_size, progress=progress)
    dla, patching, ablation = results["dla"], results["patching"], results["ablation"]
    margins, estimate = results["margins"], results["attribution"]
    report = {"clean_logit_diff": dla.total, "corrupt_logit_diff": results["corrupt_diff"],
              "answer_flip": answer_flip(dla.total, results["corrupt_diff"]),
              "embed_dla": dla.embed, "bias_dla": dla.bias, **tokens.to_dict(), "bos": bos,
              "n_tokens": len(clean_ids), "clean_tokens": list(clean_enc.tokens),
              "corrupt_tokens": list(corrupt_enc.tokens),
              "heads": _head_rows(dla, ablation, patching, margins, estimate),
              "mlps": [{"layer": i, "dla": float(v)} for i, v in enumerate(dla.mlps)]}
    if estimate is not None:
        report["attribution_agreement"] = agreement(estimate, patching, k=top_k)
    if margins is not None:
        report["margin_patching_agreement"] = agreement(margins, patching, k=top_k)
    if grid:
        report["residual_grid"] = results["grid"].tolist()
    return report
