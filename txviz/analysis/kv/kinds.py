"""MHA / GQA / MQA across models of any size, side by side (Ainslie et al. 2023; Shazeer
2019): the two pretrained models txviz runs (SmolLM2-135M, GQA with 9 query heads on 3 KV heads;
Gemma 3 270M, MQA with 4 on 1, and sliding windows on 15 of its 18 layers) beside the zoo's tiny
variants trained here. Bytes per token are measured on a real KVCache of each model's shape
(txviz.analysis.kv.long): after the first token, and averaged over a long generation, where Gemma's
windows make the average fall well below the first token's cost."""

from __future__ import annotations

from txviz.analysis.kv.long import measure_long_cache
from txviz.config import ModelConfig


def kind_row(name: str, source: str, config: ModelConfig, *, long_tokens: int = 4096,
             val_loss: float | None = None) -> dict:
    """One model's row: heads, sharing, and its fp32 cache per token measured at 1 and ``long_tokens``."""
    long_tokens = min(long_tokens, config.max_seq_len)
    first = measure_long_cache(config, 1).measured[0]
    long = measure_long_cache(config, long_tokens, chunk=long_tokens).measured[-1]
    windows = config.layer_windows
    return {"model": name, "source": source, "kind": config.attention_kind,
            "query heads": config.n_heads, "KV heads": config.n_kv_heads,
            "queries per KV head": config.n_heads // config.n_kv_heads, "head dim": config.head_dim,
            "layers (local + global)": f"{sum(w is not None for w in windows)} + {sum(w is None for w in windows)}",
            "KV bytes/token, first token (fp32)": int(first),
            "long generation (tokens)": long_tokens, "KV bytes/token, mean over it": round(long / long_tokens),
            "cache vs MHA of the same shape": f"{config.n_kv_heads / config.n_heads:.0%}",
            "val loss (zoo)": val_loss}
