"""The decoding workload of ``txviz bench --decoding``: what watching the model write costs against plain
generation, measured side by side in one worker process.

Three ways to generate the same greedy tokens after the same prompt (64 tokens of the shipped text),
timed round after round in a rotated order so a busy machine slows them alike:

* ``plain``: ``txviz.generate.generate``, the cached decode step and nothing recorded;
* ``record``: ``txviz.decoding.decode`` with the record a Decoding page keeps of every step: the top
  candidates with their text, the sampler's view, the cache's bytes, and the new token's attention row
  of every head on the layers asked for (all of them by default: changing layer or head then reruns
  nothing);
* ``record_lens``: the same with the logit lens of every step, read as a page streaming the run reads it:
  once the run ends, a few steps per product (``lens_after_run``; read at every step it is one
  vocabulary-wide product per layer, several plain steps' work), so the streamed steps keep the record's
  pace and the run's total carries the reading.

Each run is timed at every step it streams (``on_step``): a step's time is the time between two tokens
reaching the caller, the first token's the time from the call (prompt prefill included) and the run's
total from the call to its return. Ratios to the plain step are taken on the medians of steps after the
first, in CPU seconds (user + sys of the process; wall beside it). Then a branch: the record run's step t
continued with its second candidate (``txviz.decoding.branch``, reusing the cache of every token before
it), timed against ``decode`` from scratch on the same prefix and choice, and against the record run's
own steps after t (wall and CPU): a branch should cost those steps only.

The clock (``tick``: wall and CPU seconds now) and the model's loader are parameters, so a test can hand
in a tiny model and a clock whose every reading is a known step.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import replace
from typing import Callable

import torch

PROMPT_TOKENS = 64
NEW_TOKENS = 48
CANDIDATES = 10  # the candidates a step keeps (the page's default)
ROUNDS = 3
BRANCH_AT = 0.5  # the branch is taken half-way through the run
METHODS = ("plain", "record", "record_lens")

Tick = Callable[[], tuple[float, float]]  # (wall seconds, CPU seconds) now


def tick() -> tuple[float, float]:
    return time.perf_counter(), time.process_time()


def stream_marks(run: Callable[[Callable[[object], None]], object], clock: Tick) -> tuple[list[tuple], object]:
    """Readings of ``clock`` at the call, at every streamed step and at the return, and ``run``'s result."""
    marks = [clock()]
    result = run(lambda step: marks.append(clock()))
    marks.append(clock())
    return marks, result


def stream_times(marks: list[tuple]) -> dict:
    """From one run's readings: the first token's (wall, CPU) seconds, each later step's, and the total."""
    deltas = [(b[0] - a[0], b[1] - a[1]) for a, b in zip(marks, marks[1:-1])]
    return {"first": deltas[0], "steps": deltas[1:], "total": (marks[-1][0] - marks[0][0], marks[-1][1] - marks[0][1])}


def summary(runs: list[dict]) -> dict:
    """Medians over a method's runs: per later step (pooled), of the first token and of the total."""
    steps = [step for run in runs for step in run["steps"]]

    def median(values):
        return round(statistics.median(values), 5) if values else None

    return {"step_s": median([s[0] for s in steps]), "step_cpu_s": median([s[1] for s in steps]),
            "first_token_s": median([r["first"][0] for r in runs]), "total_s": median([r["total"][0] for r in runs]),
            "total_cpu_s": median([r["total"][1] for r in runs]), "runs": len(runs)}


def over(top: float | None, bottom: float | None) -> float | None:
    return round(top / bottom, 3) if top and bottom else None


def ratios(summaries: dict[str, dict]) -> dict[str, float | None]:
    """record / plain and record with lens / plain, per step, in CPU seconds and in wall seconds."""
    plain = summaries["plain"]
    return {f"{method}_over_plain{suffix}": over(summaries[method][key], plain[key])
            for method in ("record", "record_lens") for suffix, key in (("", "step_cpu_s"), ("_wall", "step_s"))}


def candidate_text(tokenizer) -> Callable[[int], str | None]:
    """A token id → its readable text, as ``txviz generate`` fills the candidates (None past the tokenizer)."""
    return lambda token: tokenizer.display(token) if token < tokenizer.vocab_size else None


def record_request(config, layers: str | tuple[int, ...] = "all", lens: bool = False):
    from txviz.decoding import StepRecordRequest
    chosen = tuple(range(config.n_layers)) if layers == "all" else tuple(layers)
    return StepRecordRequest(candidates=CANDIDATES, lens=lens, attention_layers=chosen)


def decoding(job: dict, *, loader, prompt: Callable[[object, int], torch.Tensor], clock: Tick = tick) -> dict:
    """The workload (module docstring) on ``loader.ours(job["source"])``: ``job["rounds"]`` rounds of
    ``job["new_tokens"]`` tokens after ``prompt(loaded, job["prompt_tokens"])`` (the worker's prompt: the
    shipped text's tokens), then the branch."""
    from txviz.decoding import decode
    from txviz.generate import generate

    loaded = loader.ours(job["source"])
    model, n = loaded.model, job["new_tokens"]
    ids = prompt(loaded, job["prompt_tokens"])
    request = record_request(loaded.config, job.get("attention_layers", "all"))
    text = None if loaded.tokenizer is None else candidate_text(loaded.tokenizer)

    def recorded(lens: bool):
        with_lens = replace(request, lens=lens, lens_after_run=lens)
        return lambda on_step: decode(model, ids, n, record=with_lens, token_text=text, on_step=on_step)

    methods = {"plain": lambda on_step: generate(model, ids, n, on_step=on_step),
               "record": recorded(False), "record_lens": recorded(True)}
    for method in methods.values():  # warm up: the first call of each pays allocations once
        method(lambda step: None)
    runs: dict[str, list[dict]] = {name: [] for name in methods}
    tokens: dict[str, tuple[int, ...]] = {}
    order = list(methods)
    for repeat in range(job["rounds"]):
        for name in order[repeat % len(order):] + order[:repeat % len(order)]:
            marks, result = stream_marks(methods[name], clock)
            runs[name].append(stream_times(marks))
            tokens[name] = tuple(result.new_ids)
            if name == "record":
                branched_from = result
    summaries = {name: summary(values) for name, values in runs.items()}
    return {"prompt_tokens": ids.shape[1], "new_tokens": n, "threads": torch.get_num_threads(),
            "attention_layers": len(request.attention_layers), "candidates": request.candidates,
            "summaries": summaries, **ratios(summaries),
            "same_tokens": len(set(tokens.values())) == 1,
            "branch": branch_timing(model, branched_from, ids, request, text, runs["record"], clock)}


def branch_timing(model, run, ids: torch.Tensor, request, text, record_runs: list[dict], clock: Tick) -> dict:
    """The run's step t (half-way) continued with its second candidate, timed against ``decode`` from scratch
    on the same prefix and choice, and against the record runs' own steps after t (their median sum)."""
    from txviz.decoding import branch, decode

    n = len(run.steps)
    step = min(max(int(n * BRANCH_AT), 0), n - 2)
    choices = [c.id for c in run.steps[step].candidates if c.id != run.steps[step].token.id]
    token = choices[0] if choices else run.steps[step].token.id
    branched_marks, branched = stream_marks(lambda on_step: branch(model, run, step, token, on_step=on_step), clock)
    prefix = torch.tensor([list(ids[0].tolist()) + list(run.new_ids[:step]) + [token]])
    scratch_marks, scratch = stream_marks(
        lambda on_step: decode(model, prefix, n - step - 1, record=request, token_text=text, on_step=on_step), clock)
    figures = {}
    for i, suffix, ratio in ((0, "s", ""), (1, "cpu_s", "_cpu")):  # wall, then CPU seconds
        after = statistics.median(sum(s[i] for s in r["steps"][step:]) for r in record_runs)  # steps t+1 .. n−1
        branch_s, scratch_s = (marks[-1][i] - marks[0][i] for marks in (branched_marks, scratch_marks))
        figures.update({f"branch_{suffix}": round(branch_s, 4), f"scratch_{suffix}": round(scratch_s, 4),
                        f"steps_after_{suffix}": round(after, 4),
                        f"branch_over_steps_after{ratio}": over(branch_s, after),
                        f"branch_over_scratch{ratio}": over(branch_s, scratch_s)})
    return {"step": step, "token": token, "reused_tokens": branched.reused_tokens, "steps_after": n - step - 1,
            **figures, "same_tokens": tuple(branched.new_ids[step + 1:]) == tuple(scratch.new_ids)}
