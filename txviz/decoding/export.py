"""A decoding run as plain JSON-ready data: one dict per step, as ``txviz generate --json`` lists
them under ``steps`` (the candidates with ``id``, ``text``, ``prob`` and ``prob_sampled``, the
cache's bytes, the lens' ``first_top1_layer`` and ranks when read, the attention rows when kept)."""

from __future__ import annotations

from txviz.decoding.run import Decoding
from txviz.decoding.step import Candidate, DecodingStep


def steps_json(run: Decoding) -> list[dict]:
    return [step_json(step, run.request.attention_heads) for step in run.steps]


def step_json(step: DecodingStep, heads: tuple[int, ...] | None = None) -> dict:
    """One step; ``heads`` names the rows of its attention (None: every head, in order)."""
    data = {"index": step.index, "position": step.position, **_candidate(step.token), "rank": step.token.rank,
            "forced": step.forced, "kept": step.kept,
            "candidates": [_candidate(candidate) for candidate in step.candidates],
            "kv_bytes": step.kv_bytes, "kv_bytes_per_layer": list(step.kv_bytes_per_layer),
            "seconds": step.seconds}
    if step.lens is not None:
        data.update(first_top1_layer=step.lens.first_top1_layer, lens_ranks=list(step.lens.ranks),
                    lens_probs=list(step.lens.probs))
    if step.attention:
        data["attention"] = [{"layer": layer, "query_position": step.query_position,
                              "heads": list(heads if heads is not None else range(rows.shape[0])),
                              "weights": rows.tolist()} for layer, rows in sorted(step.attention.items())]
    return data


def _candidate(candidate: Candidate) -> dict:
    return {"id": candidate.id, "text": candidate.text, "prob": candidate.prob,
            "prob_tempered": candidate.prob_tempered, "prob_sampled": candidate.prob_sampled}
