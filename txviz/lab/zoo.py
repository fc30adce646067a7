"""The variant zoo: one small base model and variants that each change ONE architectural choice.

The tutorial names the tradeoffs of attention sharing, positions, experts and shape; the zoo makes each
one a pair of real, trained models that can be opened side by side in the app. Every variant sees the
same stories, in the same order, for the same number of steps, from the same seed (txviz.lab.train), so
what differs between two of them is the choice alone.

* attention: MHA, GQA (the base), MQA, which differ only in ``n_kv_heads``;
* positions: RoPE (the base), ALiBi, learned absolute, none;
* FFN: dense (the base), or 4 experts with top-1 routing (Switch Transformer, Fedus et al.
  2021: the gate is the router probability itself, ``router_norm="all"``; renormalizing one gate
  would make it 1 and leave the router without a gradient from the language-model loss) or top-2
  routing (GShard / Mixtral: the two gates renormalized), each without and with the load-balancing
  loss (txviz.lab.balancing, weight 0.01 as in Switch). Routers learn at 10× the learning rate (a
  training setting shared by all four): the runs are short, and at 1× the unbalanced top-1 router
  had only begun to concentrate. Measured (eval.json, ``expert_load``): without the loss top-1
  routing collapses in the middle layers (one expert takes 77 % of layer 2's tokens; effective
  experts 3.9/2.8/2.2/3.2 per layer against 3.9–4.0 with it). Top-2 routing stayed balanced with
  and without the loss in every setting tried (router lr ×1/×10/×30, router init std 0–0.5,
  renormalized gates or not): with renormalized gates the language-model loss only moves the two
  chosen experts against each other, and each token still spreads its two choices;
* depth vs width: 7 layers of width 48 and 2 layers of width 88, both within a few percent of
  the base's non-embedding parameters (≈ 9·d² per layer with these ratios);
* training length: ``base_long`` is the base trained 6× as long (the one variant that breaks "same
  steps"). At 600 steps every variant tracks who a pronoun refers to (the ``pronoun_gender`` probe,
  txviz.lab.probes) but none copies from context yet (``name_surname`` at chance, 1/16). In
  ``base_long`` the loss drops again near the end (≈ 1.03 → 0.93) as induction heads form
  (``name_surname`` 77 %); when the phase change comes depends on the schedule (a 4000-step run went
  through it at step ≈ 1500, 3M tokens, and reached 99 %).

The shipped zoo lives in ``assets/zoo/<variant>/`` (txviz.lab.artifacts lists the files);
``txviz lab train --all`` rebuilds it.
"""

from __future__ import annotations

import functools

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import torch

from txviz.config import ModelConfig
from txviz.lab.artifacts import as_shipped, save_run
from txviz.lab.corpus import CorpusSettings
from txviz.lab.data import LabData, prepare_data
from txviz.lab.evaluate import evaluate
from txviz.lab.train import StepReport, TrainSettings, train
from txviz.loading.zoo import CURVES_FILE, EVAL_FILE, SHIPPED_ZOO, read_txviz_config
from txviz.model import Decoder, kv_bytes_per_token

CONTEXT = 128
DEFAULT_STEPS = 600
BALANCE_WEIGHT = 0.01
ROUTER_LR_SCALE = 10.0
LONG_FACTOR = 6
CORPUS = CorpusSettings(seed=0)
BASE = dict(d_model=64, n_layers=4, n_heads=4, n_kv_heads=2, ffn_hidden=128, norm="rmsnorm", ffn="swiglu",
            positions="rope", tie_embeddings=True, max_seq_len=CONTEXT)


@dataclass(frozen=True)
class Variant:
    name: str
    about: str  # the one choice it makes differently from the base
    changes: dict = field(default_factory=dict)  # ModelConfig fields that differ from BASE
    aux_weight: float = 0.0  # the load-balancing loss weight (a training choice, not a config one)
    steps_factor: int = 1  # trained for this many times the zoo's steps


_TOP1 = dict(n_experts=4, top_k=1, router_norm="all")
_TOP2 = dict(n_experts=4, top_k=2, router_norm="topk")
VARIANTS = {v.name: v for v in (
    Variant("base", "GQA (4 query heads, 2 KV heads), RoPE, dense SwiGLU, RMSNorm, tied embeddings"),
    Variant("mha", "attention: MHA, a K/V head per query head (4 KV heads)", dict(n_kv_heads=4)),
    Variant("mqa", "attention: MQA, one K/V head shared by all 4 query heads", dict(n_kv_heads=1)),
    Variant("alibi", "positions: ALiBi distance penalties on the scores instead of RoPE", dict(positions="alibi")),
    Variant("learned", f"positions: learned absolute embeddings ({CONTEXT}-row table) instead of RoPE",
            dict(positions="learned")),
    Variant("no_positions", "positions: none; only the causal mask tells order", dict(positions="none")),
    Variant("moe_top1", "FFN: 4 experts, top-1 (Switch), no balancing loss", _TOP1),
    Variant("moe_top1_balanced", "FFN: 4 experts, top-1 (Switch), balancing loss 0.01", _TOP1, BALANCE_WEIGHT),
    Variant("moe_top2", "FFN: 4 experts, top-2 renormalized (Mixtral), no balancing loss", _TOP2),
    Variant("moe_top2_balanced", "FFN: 4 experts, top-2 renormalized (Mixtral), balancing loss 0.01", _TOP2,
            BALANCE_WEIGHT),
    Variant("deep_narrow", "depth vs width: 7 layers of d_model 48", dict(n_layers=7, d_model=48, ffn_hidden=96)),
    Variant("shallow_wide", "depth vs width: 2 layers of d_model 88", dict(n_layers=2, d_model=88, ffn_hidden=176)),
    Variant("base_long", "training length: the base trained 6× longer, past the induction-head phase change",
            steps_factor=LONG_FACTOR),
)}


def variant(name: str) -> Variant:
    if name not in VARIANTS:
        raise ValueError(f"no zoo variant {name!r}; known: {', '.join(VARIANTS)}")
    return VARIANTS[name]


def variant_config(name: str, vocab_size: int) -> ModelConfig:
    v = variant(name)
    return ModelConfig(vocab_size=vocab_size, **{**BASE, **v.changes}, name=name,
                       source=f"txviz lab zoo: {v.about}")


def train_settings(name: str, steps: int = DEFAULT_STEPS) -> TrainSettings:
    v = variant(name)
    return TrainSettings(steps=steps * v.steps_factor, context=CONTEXT, aux_weight=v.aux_weight,
                         router_lr_scale=ROUTER_LR_SCALE, seed=CORPUS.seed)


def train_variant(name: str, out_root: Path, data: LabData, steps: int = DEFAULT_STEPS,
                  progress: Callable[[StepReport], None] | None = None) -> dict:
    """Train ``name``, evaluate the weights as saved, write ``out_root/name``; its summary row."""
    config = variant_config(name, data.vocab_size)
    result = train(config, data, train_settings(name, steps), progress)
    shipped = as_shipped(result.model)
    evaluation = {**evaluate(shipped, data, CONTEXT), "weights_dtype": "float16"}
    save_run(out_root / name, shipped, data.tokenizer, {"variant": name, **result.curves}, evaluation)
    return summary(out_root / name)


def train_zoo(names: list[str], out_root: Path = SHIPPED_ZOO, steps: int = DEFAULT_STEPS,
              progress: Callable[[str, StepReport], None] | None = None) -> list[dict]:
    for name in names:
        variant(name)  # unknown names fail before the corpus is built
    data = prepare_data(CORPUS)
    return [train_variant(name, out_root, data, steps, None if progress is None else
                          (lambda report, name=name: progress(name, report))) for name in names]


@functools.lru_cache(maxsize=256)  # a config is frozen; the app's model picker asks on every rerun
def n_params(config: ModelConfig) -> int:
    """The parameter count of the decoder ``config`` builds (counted on the meta device: no memory)."""
    with torch.device("meta"):
        return sum(p.numel() for p in Decoder(config).parameters())


def summary(directory: Path) -> dict:
    """One row of the zoo table from a trained variant's directory."""
    config = read_txviz_config(directory)
    evaluation = json.loads((directory / EVAL_FILE).read_text(encoding="utf-8"))
    curves = json.loads((directory / CURVES_FILE).read_text(encoding="utf-8"))
    tail = curves["loss"][-max(1, len(curves["loss"]) // 20):]
    load = evaluation.get("expert_load")
    return {"variant": config.name, "path": str(directory), "n_params": n_params(config),
            "kv_bytes_per_token_fp32": kv_bytes_per_token(config, 4.0),
            "final_train_loss": round(sum(tail) / len(tail), 4), "val_loss": evaluation["val_loss"],
            "val_loss_2x": evaluation["val_loss_2x"], "val_loss_4x": evaluation["val_loss_4x"],
            "tokens_per_second": curves["tokens_per_second"], "seconds": curves["seconds"],
            "steps": len(curves["loss"]), "expert_load": None if load is None else load["mean"],
            "effective_experts": None if load is None else load["effective_experts_per_layer"],
            "bytes_on_disk": sum(p.stat().st_size for p in directory.iterdir() if p.is_file())}


def stored_window_losses(directory: Path) -> torch.Tensor | None:
    """(W,) the per-window validation losses eval.json keeps (txviz.lab.evaluate), or None."""
    evaluation = json.loads((Path(directory) / EVAL_FILE).read_text(encoding="utf-8"))
    stored = evaluation.get("val_window_losses")
    return None if not stored else torch.tensor(stored, dtype=torch.float64)


def add_window_losses(directory: Path) -> list[float]:
    """Score a trained variant's validation windows and keep each window's loss in its eval.json (for a
    zoo evaluated before eval.json held them; the weights are untouched). The held-out windows are
    rebuilt from the variant's own tokenizer, so no training story is generated."""
    from txviz.lab.data import held_out_windows
    from txviz.lab.evaluate import rounded_window_losses
    from txviz.loading.zoo import load_zoo_model

    loaded = load_zoo_model(directory, device="cpu")
    windows = held_out_windows(loaded.tokenizer.backend, CORPUS, loaded.config.max_seq_len)
    losses = rounded_window_losses(loaded.model, windows)
    path = Path(directory) / EVAL_FILE
    evaluation = json.loads(path.read_text(encoding="utf-8"))
    path.write_text(json.dumps({**evaluation, "val_window_losses": losses}, indent=2) + "\n", encoding="utf-8")
    return losses


def describe(directory: Path) -> str:
    """One line for a model picker, from the directory's config.json: the variant, the one choice it
    makes (the zoo writes it as the config's ``source``) and its size."""
    config = read_txviz_config(Path(directory))
    about = (config.source or "").removeprefix("txviz lab zoo: ") or "txviz lab model"
    return (f"{Path(directory).name} — {about} · {config.n_layers} layers × d {config.d_model}, "
            f"{n_params(config) / 1e3:.0f} k params")


def listing(root: Path = SHIPPED_ZOO) -> list[dict]:
    """Every variant with its description and config changes, and its summary where it is trained."""
    rows = []
    for v in VARIANTS.values():
        trained = (root / v.name / EVAL_FILE).is_file()
        rows.append({"variant": v.name, "about": v.about, "changes": v.changes, "aux_weight": v.aux_weight,
                     "trained": trained, **(summary(root / v.name) if trained else {})})
    return rows
