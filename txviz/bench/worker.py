"""A benchmark worker: one job (JSON) in a fresh process, ``python -m txviz.bench.worker JOB``, its result
printed as JSON on stdout. Jobs: ``timing`` (methods side by side, txviz.bench.rounds), ``memory`` (one
method's peak RSS), ``decode`` (tokens/s of txviz's and transformers' generate), ``attention`` (one
layer timed by part, txviz.bench.attention) and ``decoding`` (plain generation against the per-step
record, txviz.bench.decoding).

Where the models come from is a parameter (``loader``: txviz's own loader and transformers' on the same
weights), and so is the timing worker's clock, so a test can hand in a tiny model and calls that "take"
a known time.
"""

from __future__ import annotations

import json
import resource
import statistics
import sys
import time
from typing import Callable

import torch

from txviz.bench.rounds import SAMPLING, Clock, Sampling, measure, rounds, spread

METHODS = ("plain", "trace", "hf")
MEMORY_HEADROOM = 0.6  # run a method only if its estimated peak is under this share of available memory
DECODE_PROMPT = "What is the capital of France?"
MODEL_REFUSED_EXIT = 3  # a worker's exit status when the model could not be loaded (its reason on stdout)


class Loader:
    """A worker's models from a source (a path, or "default" for the default model): txviz's, and
    transformers' on the same weights with eager attention, in float32 on the CPU."""

    def ours(self, source: str):
        from txviz.loading import load
        return load(None if source == "default" else source, device="cpu", dtype=torch.float32)

    def hf(self, source: str):
        import transformers
        from transformers import AutoModelForCausalLM

        transformers.logging.set_verbosity_error()
        if source == "default":
            from txviz.loading import fetch
            path = fetch.ensure(fetch.DEFAULT_MODEL)
            hf = AutoModelForCausalLM.from_pretrained(path.parent, gguf_file=path.name, attn_implementation="eager",
                                                      dtype=torch.float32)
        else:
            hf = AutoModelForCausalLM.from_pretrained(source, attn_implementation="eager", dtype=torch.float32)
        hf.generation_config.eos_token_id = None  # same number of tokens as ours: never stop early
        hf.generation_config.pad_token_id = 0
        return hf.eval()


LOADER = Loader()


def work(job: dict, *, loader: Loader = LOADER) -> dict:
    """The job's result, after setting the worker's torch threads."""
    if job["threads"]:
        torch.set_num_threads(job["threads"])
    kinds = {"timing": timing, "memory": memory, "decode": decode, "attention": attention, "decoding": decoding}
    return kinds[job["kind"]](job, loader=loader)


def attention(job: dict, *, loader: Loader = LOADER) -> dict:
    from txviz.bench.attention import attention_parts
    return attention_parts(loader.ours(job["source"]).model, torch.tensor(job["ids"])[None], job["repeats"])


def decoding(job: dict, *, loader: Loader = LOADER) -> dict:
    from txviz.bench.decoding import decoding as workload
    return workload(job, loader=loader, prompt=prompt)


def prompt(loaded, n_tokens: int) -> torch.Tensor:
    """(1, T): the shipped text's tokens, repeated to length; random ids for a model without a tokenizer."""
    if loaded.tokenizer is None:
        return torch.randint(0, loaded.config.vocab_size, (1, n_tokens), generator=torch.Generator().manual_seed(0))
    from txviz.analysis.texts import read_text
    base = loaded.tokenizer.encode(read_text(), bos="none").ids
    return torch.tensor((base * (n_tokens // len(base) + 1))[:n_tokens])[None]


def methods(loaded, hf_model, ids: torch.Tensor) -> dict[str, Callable[[], object]]:
    """The calls timed: a plain forward, a trace keeping every head's summaries, transformers' eager
    attention with every map (when its model is given); each computes the last position's logits only."""
    from txviz.capture.trace import SUMMARY_CAPTURE, trace

    def plain():
        with torch.inference_mode():
            return loaded.model(ids, last_only=True)

    def traced():
        return trace(loaded.model, ids, SUMMARY_CAPTURE)

    def hf():
        with torch.inference_mode():
            return hf_model(ids, output_attentions=True, logits_to_keep=1)

    return {"plain": plain, "trace": traced, **({"hf": hf} if hf_model is not None else {})}


def skips(job: dict, loaded) -> dict[str, str]:
    """Methods whose estimated peak memory would not fit: skipped with the estimate, not crashed."""
    import psutil

    from txviz.capture.cost import capture_cost
    from txviz.capture.trace import SUMMARY_CAPTURE

    config, t = loaded.config, job["tokens"]
    available = psutil.virtual_memory().available
    weights = loaded.n_params * 4
    estimates = {
        "trace": capture_cost(config, t, SUMMARY_CAPTURE, weight_bytes=weights).peak_bytes,
        # transformers keeps every layer's (H, T, T) weights and holds ~3 more per layer while it runs
        "hf": weights * 2 + (config.n_layers + 3) * config.n_heads * t * t * 4,
    }
    skipped = {m: f"estimated peak {b / 2**30:.1f} GiB > {MEMORY_HEADROOM:.0%} of {available / 2**30:.1f} GiB available"
               for m, b in estimates.items() if b > MEMORY_HEADROOM * available}
    if not job["hf"]:
        skipped["hf"] = "transformers not installed or --no-hf"
    return skipped


def timing(job: dict, *, loader: Loader = LOADER, clock: Clock = measure, sampling: Sampling = SAMPLING) -> dict:
    """The methods ``job["methods"]`` names (all three when it names none) side by side in this process;
    a model is loaded only when one of them needs it (transformers' only for ``hf``)."""
    loaded = loader.ours(job["source"])
    skipped = skips(job, loaded)
    wanted = [m for m in job.get("methods", METHODS) if m not in skipped]
    hf_model = loader.hf(job["source"]) if "hf" in wanted else None
    ids = prompt(loaded, job["tokens"])
    timed = {m: f for m, f in methods(loaded, hf_model, ids).items() if m in wanted}
    for name, method in methods(loaded, hf_model, ids[:, :16]).items():  # warm up every code path timed
        if name in wanted:
            method()
    samples, n_rounds = rounds(timed, job["repeats"], clock=clock, sampling=sampling)
    wall, cpu, faults = ({m: [s[i] for s in samples[m]] for m in timed} for i in range(3))
    latency = rebuild_latency(timed["trace"](), job["repeats"], clock=clock) if "trace" in timed else {}
    return {"threads": torch.get_num_threads(), "skipped": skipped, "ids": ids[0].tolist(), "latency": latency,
            "seconds": {m: round(statistics.median(wall[m]), 4) if m in wall else None for m in METHODS},
            "best_seconds": {m: round(min(wall[m]), 4) for m in wall},
            "cpu_seconds": {m: round(statistics.median(cpu[m]), 4) for m in cpu},
            "minflt": {m: int(statistics.median(faults[m])) for m in faults},
            "ratio_spread": {m: round(spread(cpu[m], cpu["plain"]), 4)
                             for m in cpu if m != "plain" and "plain" in cpu},
            "rounds": n_rounds}


def rebuild_latency(tr, repeats: int, *, clock: Clock = measure) -> dict[str, float]:
    """What a click costs once the trace exists: one head's whole map, and a 256-row band of it,
    rebuilt from q_rot/k_rot (middle layer, first head)."""
    layer, t = tr.layers[len(tr.layers) // 2], tr.n_tokens
    band = slice(max(0, t - 256), t)
    whole = [clock(lambda: tr.attn(layer, 0))[0] for _ in range(repeats)]
    rows = [clock(lambda: tr.attn(layer, 0, rows=band))[0] for _ in range(repeats)]
    return {"rebuild_map_s": round(statistics.median(whole), 4), "rebuild_rows_s": round(statistics.median(rows), 4)}


def memory(job: dict, *, loader: Loader = LOADER) -> dict:
    """One method once, in a process that loads only the model it needs."""
    ids = torch.tensor(job["ids"])[None]
    hf = job["method"] == "hf"
    loaded = None if hf else loader.ours(job["source"])
    hf_model = loader.hf(job["source"]) if hf else None
    load_peak = _max_rss_mb()
    if hf:
        with torch.inference_mode():
            result = hf_model(ids, output_attentions=True, logits_to_keep=1)
    else:
        result = methods(loaded, None, ids)[job["method"]]()
    del result
    return {"load_rss_mb": load_peak, "peak_rss_mb": _max_rss_mb()}


def _max_rss_mb() -> float:
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)  # Linux: KiB


def decode(job: dict, *, loader: Loader = LOADER) -> dict:
    """Greedy decoding speed of txviz's generate (our KV cache) and transformers' (same prompt, same new
    tokens, no early stop), alternating which goes first."""
    from txviz.generate import generate

    loaded = loader.ours(job["source"])
    hf_model = loader.hf(job["source"]) if job["hf"] else None
    if loaded.tokenizer is not None and loaded.tokenizer.chat_template:
        text = loaded.tokenizer.apply_chat_template([{"role": "user", "content": DECODE_PROMPT}])
        ids = torch.tensor(loaded.tokenizer.encode(text, bos="none").ids)[None]
    elif loaded.tokenizer is not None:  # a base model (Gemma 3 270M): the prompt as text, with its own BOS rule
        bos = "bos" if loaded.tokenizer.adds_bos else "none"
        ids = torch.tensor(loaded.tokenizer.encode(DECODE_PROMPT, bos=bos).ids)[None]
    else:
        ids = torch.randint(0, loaded.config.vocab_size, (1, 16), generator=torch.Generator().manual_seed(0))
    n = job["new_tokens"]

    def ours():
        return list(generate(loaded.model, ids, n).new_ids)

    def theirs():
        with torch.inference_mode():
            return hf_model.generate(ids, max_new_tokens=n, do_sample=False, use_cache=True)[0, ids.shape[1]:].tolist()

    runs = {"txviz": ours, **({"hf": theirs} if hf_model is not None else {})}
    for function in runs.values():  # warm up
        function()
    seconds: dict[str, list[float]] = {name: [] for name in runs}
    tokens: dict[str, list[int]] = {}
    for repeat in range(job["repeats"]):
        for name in (list(runs) if repeat % 2 == 0 else list(runs)[::-1]):
            start = time.perf_counter()
            tokens[name] = runs[name]()
            seconds[name].append(time.perf_counter() - start)
    rate = {name: round(n / statistics.median(values), 2) for name, values in seconds.items()}
    return {"prompt_tokens": ids.shape[1], "new_tokens": n, "txviz_tok_s": rate["txviz"], "hf_tok_s": rate.get("hf"),
            "same_tokens": tokens["txviz"] == tokens["hf"] if "hf" in tokens else None}



def main(job: dict, *, loader: Loader = LOADER) -> int:
    """A worker's entry point: its result as JSON, or, when the model cannot be loaded (a missing or
    broken file), the reason as JSON and ``MODEL_REFUSED_EXIT``, so the parent reports one line."""
    try:
        result = work(job, loader=loader)
    except (ValueError, FileNotFoundError) as error:  # ModelLoadError and kin: ours, with a message
        print(json.dumps({"error": str(error), "type": type(error).__name__}))
        return MODEL_REFUSED_EXIT
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main(json.loads(sys.argv[1])))
