"""The "Real models side by side" tab: SmolLM2 (GQA, every layer keeps every token) and
Gemma 3 270M (MQA; 15 sliding layers keep their last 512 tokens, 3 global layers keep all) with their
real KVCache buffers filled over a long generation, measured after every chunk, beside the formula."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from app import cache
from app.figures import kv_long_charts
from app.services import real_models
from txviz.analysis.kv.long import LongCache
from txviz.config import ModelConfig

LENGTHS = (1024, 2048, 4096, 8192)


def kind_layers(config: ModelConfig) -> dict[str, int]:
    """One layer of each kind: label → layer index."""
    local = [i for i in range(config.n_layers) if config.is_sliding(i)]
    full = [i for i in range(config.n_layers) if not config.is_sliding(i)]
    kinds = {f"local layer ({len(local)} of them, window {config.sliding_window})": local[0]} if local else {}
    if full:
        kinds[f"global layer ({len(full)} of them)" if local else f"every layer ({len(full)})"] = full[0]
    return kinds


def draw(source, loaded) -> None:
    configs = real_models.fetched_configs()
    missing = real_models.missing_names()
    if missing:
        st.info(f"Not fetched yet: {', '.join(missing)}. Choose it in the sidebar (or `txviz fetch --model "
                f"{missing[0]}`) to see it here beside the others.")
    if not configs:
        return
    longest = min(max(LENGTHS), *(c.max_seq_len for c in configs.values()))
    n_tokens = st.select_slider("Tokens generated", [n for n in LENGTHS if n <= longest] or [longest],
                                value=min(4096, longest), key="kv_real_tokens")
    runs = {name: cache.long_cache(config, int(n_tokens)) for name, config in configs.items()}
    a, b = st.columns(2)
    a.plotly_chart(kv_long_charts.total_bytes(runs), key="kv_real_total")
    b.plotly_chart(kv_long_charts.held_per_kind(runs, {n: kind_layers(c) for n, c in configs.items()}),
                   key="kv_real_held")
    st.dataframe(summary(configs, runs), hide_index=True)
    st.caption("Measured: a KVCache of each model's shape (fp32, as the app runs them) filled through `update`, "
               "the path decoding takes, and its buffers' filled slots read back after every chunk. Formula: "
               "`kv_cache_bytes`, each sliding layer counting at most its window. bf16 would halve every number.")


def summary(configs: dict[str, ModelConfig], runs: dict[str, LongCache]) -> pd.DataFrame:
    rows = []
    for name, config in configs.items():
        run = runs[name]
        window = config.sliding_window if any(config.is_sliding(i) for i in range(config.n_layers)) else None
        early_end = min(window or int(run.tokens[-1]), int(run.tokens[-1]))
        late = run.added_per_token(early_end, int(run.tokens[-1])) if early_end < run.tokens[-1] else None
        rows.append({"model": name, "attention": f"{config.attention_kind} {config.n_heads}q/{config.n_kv_heads}kv",
                     "layers (local + global)": f"{sum(w is not None for w in config.layer_windows)} + "
                                                f"{sum(w is None for w in config.layer_windows)}",
                     "bytes/token, first tokens (measured)": f"{run.added_per_token(0, early_end):,.0f}",
                     "bytes/token past the window (measured)": "—" if late is None else f"{late:,.0f}",
                     f"MiB at {int(run.tokens[-1])} (measured)": round(run.measured[-1] / 2**20, 2),
                     "MiB (formula)": round(run.formula[-1] / 2**20, 2),
                     "largest |measured − formula|, bytes": run.largest_difference})
    return pd.DataFrame(rows)
