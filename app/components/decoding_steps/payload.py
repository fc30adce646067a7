"""What the Decoding page's step viewer (app/components/decoding_steps) receives: one binary blob per
run, and a small view.

The blob: "TXDS", the header's length (uint32, little-endian), a JSON header, then the new token's
attention rows as uint16. The header holds every step's record as the page shows it — the sampler's
candidates (label, id, rank, raw probability, after temperature, sampled from), the drawn token with its
rank and probabilities, how many tokens the sampler kept, whether a branch forced it, its position, its
time, the cache's bytes per layer and the formula's — the run's token labels, each layer's window and
how the run sampled. The rows follow, step by step, layer by layer (of those sent), head by head, each
``position`` long: a weight w in [0, 1] sent as round(w × 65535), so the browser's value is within
``QUANTUM`` / 2 of the model's (float16 would be 4.9e-4 off near 1).

Byte budget: every layer's rows go in the blob when they take at most ``ALL_LAYERS_BYTES`` (SmolLM2, a
64-token prompt and 48 new tokens: 30 × 9 × 48 steps × ~88 keys × 2 B = 2.3 MB), so a layer or head
change never leaves the browser; past it, the page's layer alone, and a layer change goes through the
server, which sends that layer's blob. The blob is the same bytes on every rerun of a run and layer,
so Streamlit sends a reference to the browser's copy, not the rows again. Pure, no Streamlit."""

from __future__ import annotations

import hashlib
import json
import struct

import numpy as np

from app.figures.charts import MASKED_COLOR, SCALE as COLOURS, colorscale
from txviz.loading.tokenizer.token_text import visible_controls

ALL_LAYERS_BYTES = 4 * 1024 * 1024
MAGIC = b"TXDS"
SCALE = 65535
QUANTUM = 1 / SCALE  # one step of the rows as the browser reads them
DECIMALS = 6  # of a probability sent (a hover shows 4)


def label(text: str | None, token_id: int) -> str:
    """A token as a pill or an axis reads it: spaces and line ends shown, its id where it has no text."""
    if text is None:
        return f"#{token_id}"
    return visible_controls(text).replace(" ", "␣").replace("\n", "↵") or "∅"


def run_id(*parts) -> str:
    """A short name for what a run was computed from (its inputs and its tokens): the browser files the
    run's records under it and starts at step 0 when it changes."""
    return hashlib.blake2b(repr(parts).encode(), digest_size=8).hexdigest()


def rows_bytes(run, n_layers: int, n_heads: int) -> int:
    return sum(step.position for step in run.steps) * n_layers * n_heads * 2


def layers_to_send(run, n_layers: int, n_heads: int, layer: int) -> list[int]:
    """Every layer when their rows fit ``ALL_LAYERS_BYTES``, else ``layer`` alone."""
    return list(range(n_layers)) if rows_bytes(run, n_layers, n_heads) <= ALL_LAYERS_BYTES else [layer]


def quantised(rows: np.ndarray) -> np.ndarray:
    return np.rint(np.clip(np.asarray(rows, dtype=np.float64), 0.0, 1.0) * SCALE).astype("<u2")


def _rounded(values) -> list[float]:
    return np.round(np.asarray(values, dtype=float), DECIMALS).tolist()


def _candidate(c) -> dict:
    return {"id": c.id, "label": label(c.text, c.id), "rank": c.rank, "prob": round(c.prob, DECIMALS),
            "prob_tempered": round(c.prob_tempered, DECIMALS), "prob_sampled": round(c.prob_sampled, DECIMALS)}


def sampling_text(sampling) -> str:
    if sampling.greedy:
        return "greedy"
    return (f"temperature {sampling.temperature:g}" + (f", top-k {sampling.top_k}" if sampling.top_k else "")
            + (f", top-p {sampling.top_p:g}" if sampling.top_p else "") + f", seed {sampling.seed}")


def steps_blob(run, *, run_key: str, texts: list[str], windows: list[int | None], n_heads: int, layers: list[int],
               vocab_size: int, element_bytes: int, formulas: list[list[int]]) -> bytes:
    """The run's records as the browser decodes them: ``texts`` every token of the run (prompt and
    generated, readable), ``formulas`` each step's cache bytes per layer by the formula, ``layers`` the
    layers whose rows go in."""
    steps, chunks = [], []
    for step, formula in zip(run.steps, formulas):
        steps.append({"position": step.position, "query_position": step.query_position, "seconds": step.seconds,
                      "kept": step.kept, "forced": step.forced, "token": _candidate(step.token),
                      "candidates": [_candidate(c) for c in step.candidates],
                      "kv": list(step.kv_bytes_per_layer), "formula": list(formula)})
        for layer in layers:
            rows = step.attention[layer].float().numpy()  # (heads, position)
            chunks.append(quantised(rows[:n_heads]).tobytes())
    header = json.dumps({
        "run_id": run_key, "layers": layers, "n_layers": len(windows), "n_heads": n_heads, "windows": windows,
        "vocab_size": vocab_size, "element_bytes": element_bytes, "greedy": bool(run.sampling.greedy),
        "sampling": sampling_text(run.sampling), "n_prompt": len(run.prompt_ids),
        "labels": [label(t, i) for t, i in zip(texts, run.ids)], "steps": steps,
        "colorscale": [list(stop) for stop in colorscale(COLOURS)], "masked_color": MASKED_COLOR}).encode()
    header += b" " * (len(header) % 2)  # the rows start on an even byte
    return MAGIC + struct.pack("<I", len(header)) + header + b"".join(chunks)


def read_blob(blob: bytes) -> tuple[dict, list[dict[int, np.ndarray]]]:
    """(header, per step {layer: (heads, position) float64 rows}) back from ``steps_blob``: what the
    browser's decoder computes."""
    if blob[:4] != MAGIC:
        raise ValueError("not a decoding steps blob")
    (size,) = struct.unpack("<I", blob[4:8])
    header = json.loads(blob[8:8 + size])
    values = np.frombuffer(blob[8 + size:], dtype="<u2")
    rows, at, heads = [], 0, header["n_heads"]
    for step in header["steps"]:
        per_layer = {}
        for layer in header["layers"]:
            n = heads * step["position"]
            per_layer[layer] = values[at:at + n].reshape(heads, step["position"]) / SCALE
            at += n
        rows.append(per_layer)
    if at != len(values):
        raise ValueError("the blob's rows do not match its header")
    return header, rows
