"""Positions measured on a loaded model.

* the RoPE angle table m·θ_i the model really uses, the wavelength 2π/θ_i of each pair, and the
  path of one real query pair as its position changes;
* RoPE's relative property on real vectors: q_m·k_n depends only on m − n;
* RoPE scaling variants (linear, NTK-aware, YaRN, Llama 3) on the angle table and on the model's
  per-token loss over a text;
* ALiBi's slopes and bias, and what it would add to a head's real scores; on an ALiBi model, the
  slopes read back from the bias its forward pass added, and how far back each head looks with and
  without that bias;
* learned absolute positions: how alike the table's rows are (cosine similarity) and their norms;
* no positions: the causal mask alone still tells a query how many tokens precede it (a query at i
  sees i + 1 keys), so a head that spreads its attention has entropy up to log(i + 1) (Haviv et al.
  2022, "Transformer Language Models without Positional Encodings Still Learn Positional Information");
* permutation: without positions, layer 0's scores of a shuffled prompt are the same set.

``SECTIONS`` names what the Positions page shows for each scheme: only what the model uses, plus
ALiBi as a labelled what-if on a RoPE model.

Variants of a loaded model (other positions, other scaling) are new Decoders that share the
original's weight tensors (nothing is copied or mutated).
"""

from __future__ import annotations

import math

import torch
from torch.nn import functional as F

from txviz.model.sinks import softmax_with_sink

from txviz.config import RopeScaling
from txviz.model.positions import alibi_slopes, apply_rotary, rope_inv_freq
from txviz.model.transformer import Decoder
from txviz.capture.trace import trace

SCALING_KINDS = ("none", "linear", "ntk", "yarn", "llama3")
SECTIONS = {
    "rope": ("RoPE angles", "RoPE scaling", "ALiBi what-if", "Permutation"),
    "alibi": ("ALiBi slopes and bias", "Permutation"),
    "learned": ("Learned position table", "Permutation"),
    "none": ("No positions: the causal mask", "Permutation"),
}


def sections(positions: str) -> tuple[str, ...]:
    """The Positions page's tabs for a model with ``positions`` (a ModelConfig.positions value)."""
    return SECTIONS[positions]


def wavelengths(inv_freq: torch.Tensor) -> torch.Tensor:
    """Tokens per full turn of each pair: 2π/θ_i."""
    return 2 * math.pi / inv_freq


def angle_table(inv_freq: torch.Tensor, n_positions: int) -> torch.Tensor:
    """(positions, D/2) angles m·θ_i, wrapped to [0, 2π) for display."""
    angles = torch.arange(n_positions, dtype=torch.float32)[:, None] * inv_freq.float()[None, :]
    return torch.remainder(angles, 2 * math.pi)


def scaling_for(kind: str, factor: float, original_context: int) -> RopeScaling:
    if kind == "none":
        return RopeScaling()
    return RopeScaling(kind=kind, factor=factor, original_max_seq_len=original_context)


def scaled_inv_freqs(config, factor: float) -> dict[str, torch.Tensor]:
    """Each scaling kind's frequencies for the dimensions this model rotates and its θ (original context =
    its own)."""
    return {kind: rope_inv_freq(config.rope_dims, config.rope_theta,
                                scaling_for(kind, factor, config.max_seq_len))[0] for kind in SCALING_KINDS}


def pair_trajectory(vector: torch.Tensor, inv_freq: torch.Tensor, pair: int, positions: torch.Tensor) -> torch.Tensor:
    """(P, 2): where the pair (x_i, x_{i+D/2}) of a real vector lands when placed at each position."""
    half = vector.shape[-1] // 2
    x, y = float(vector[pair]), float(vector[pair + half])
    angle = positions.double() * float(inv_freq[pair])
    return torch.stack([x * angle.cos() - y * angle.sin(), x * angle.sin() + y * angle.cos()], dim=-1)


def rotate_at(x: torch.Tensor, inv_freq: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
    """Rotate one vector x (D,) to each of ``positions``: (P, D)."""
    angles = positions.double()[:, None] * inv_freq.double()[None, :]
    emb = torch.cat([angles, angles], dim=-1)
    return apply_rotary(x.double()[None], emb.cos(), emb.sin())


def relative_scores(q: torch.Tensor, k: torch.Tensor, inv_freq: torch.Tensor, n_positions: int) -> torch.Tensor:
    """(P, P) matrix of q rotated to m dotted with k rotated to n, for m, n < n_positions."""
    positions = torch.arange(n_positions)
    return rotate_at(q, inv_freq, positions) @ rotate_at(k, inv_freq, positions).T


def spread_per_offset(scores: torch.Tensor) -> float:
    """Largest (max − min) over the entries of each diagonal m − n = const: 0 when the score depends
    only on the offset."""
    n = scores.shape[0]
    return max(float(scores.diagonal(off).max() - scores.diagonal(off).min()) for off in range(-n + 1, n))


def variant(model: Decoder, **changes) -> Decoder:
    """The same weights under a config with ``changes`` (e.g. positions="none", rope_scaling=...)."""
    config = model.config.replace(**changes)
    weights = model.state_dict()
    if config.positions != "learned":
        weights.pop("positions.weight", None)
    device, dtype = model.embed.weight.device, model.embed.weight.dtype
    return Decoder.from_state_dict(config, weights, device=device, dtype=dtype)


@torch.inference_mode()
def token_losses(model: Decoder, ids: torch.Tensor) -> torch.Tensor:
    """(T−1,) next-token negative log-likelihood at each position."""
    ids = model.check_ids(ids).to(model.embed.weight.device)
    logits = model(ids)[0, :-1].float()
    return F.cross_entropy(logits, ids[0, 1:], reduction="none").cpu()


def layer0_score_sets(model: Decoder, ids: torch.Tensor, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Sorted layer-0 scores QKᵀ/√d (all heads, all pairs, before the mask) for the prompt and a
    shuffle of it, and the permutation used."""
    ids = model.check_ids(ids)
    order = torch.randperm(ids.shape[1], generator=torch.Generator().manual_seed(seed))
    scores = [trace(model, x, ("attn_logits",), layers=[0])["attn_logits"][0].flatten().sort().values
              for x in (ids, ids[:, order])]
    return scores[0], scores[1], order


def alibi_bias_matrix(n_heads: int, n_tokens: int) -> torch.Tensor:
    """(H, T, T): −slope_h·(i − j) on and below the diagonal, −inf above."""
    distance = torch.arange(n_tokens)[:, None] - torch.arange(n_tokens)[None, :]
    bias = -alibi_slopes(n_heads)[:, None, None] * distance.float()
    return bias.masked_fill(distance < 0, float("-inf"))


def _softmax(scores: torch.Tensor, sink: float | None) -> torch.Tensor:
    """softmax over the last dimension, with a head's learned sink logit in the denominator where it has
    one (gpt-oss, txviz.model.sinks): the weights on real keys then sum to less than 1."""
    if sink is None:
        return torch.softmax(scores, dim=-1)
    rows = scores.reshape(1, -1, scores.shape[-1])  # (1, R, S): one head's rows
    return softmax_with_sink(rows, torch.tensor([sink], dtype=scores.dtype))[0].reshape(scores.shape)


def without_bias(scores: torch.Tensor, bias: torch.Tensor, sink: float | None = None) -> torch.Tensor:
    """softmax(scores − bias) over the last dimension: the attention a head would have had without an
    additive ``bias`` (masked −inf entries stay masked; the bias there is ignored); ``sink``: the head's."""
    finite_bias = torch.where(torch.isfinite(bias), bias, torch.zeros_like(bias))
    return _softmax(scores.double() - finite_bias.double(), sink).float()


def with_bias(scores: torch.Tensor, bias: torch.Tensor, sink: float | None = None) -> torch.Tensor:
    """softmax(scores + bias): a what-if bias added to real (masked) scores; ``sink``: the head's."""
    finite_bias = torch.where(torch.isfinite(bias), bias, torch.zeros_like(bias))
    return _softmax(scores.double() + finite_bias.double(), sink).float()


def measured_slopes(bias: torch.Tensor) -> torch.Tensor:
    """(H,) the slope of each head read back from a captured ALiBi bias (H, T, S): the least-squares
    fit of bias = −slope·(i − j) over the visible pairs (i ≥ j)."""
    t, s = bias.shape[-2:]
    distance = (torch.arange(t)[:, None] + (s - t) - torch.arange(s)[None, :]).double()  # (T, S)
    visible = (distance > 0) & torch.isfinite(bias).all(dim=0)
    if not visible.any():
        raise ValueError("a bias over one token has no distance to read a slope from")
    d, b = distance[visible], bias[:, visible].double()  # (N,), (H, N)
    return (-(b * d).sum(-1) / (d * d).sum()).float()


def mean_distance(probs: torch.Tensor) -> torch.Tensor:
    """(..., ) how far back attention looks: Σ_j p_ij·(i − j), averaged over the query rows of
    (..., T, S) maps (the last T keys are the queries' own positions)."""
    t, s = probs.shape[-2:]
    distance = (torch.arange(t)[:, None] + (s - t) - torch.arange(s)[None, :]).clamp(min=0).to(probs.dtype)
    return (torch.nan_to_num(probs) * distance).sum(-1).mean(-1)


def row_entropy(probs: torch.Tensor) -> torch.Tensor:
    """(..., T) entropy in nats of each attention row of (..., T, S)."""
    p = torch.nan_to_num(probs.double())
    return -torch.where(p > 0, p * p.log(), torch.zeros_like(p)).sum(-1).float()


def uniform_entropy(n_tokens: int) -> torch.Tensor:
    """(T,) log(i + 1): the entropy of a query at i that spreads evenly over the i + 1 keys it sees."""
    return torch.arange(1, n_tokens + 1, dtype=torch.float64).log().float()


def cosine_similarity_matrix(table: torch.Tensor) -> torch.Tensor:
    """(P, P) cosine similarity between the rows of a (P, d) position table."""
    unit = F.normalize(table.double(), dim=-1)
    return (unit @ unit.T).float()


def neighbour_similarity(table: torch.Tensor, max_offset: int) -> torch.Tensor:
    """(max_offset,) mean cosine similarity of rows p and p + k for k = 1 … max_offset: how fast a
    learned table forgets where it is."""
    similarity = cosine_similarity_matrix(table)
    return torch.stack([similarity.diagonal(k).mean() for k in range(1, max_offset + 1)])


# ---- summaries the Positions page shows --------------------------------------------------------------
def attention_probs(scores: torch.Tensor, sink: float | None = None) -> torch.Tensor:
    """softmax over the keys of one head's captured (masked) scores (..., T, S), with the head's learned
    ``sink`` where it has one: the map the model attends with."""
    return _softmax(scores.float(), sink)


def pairs_beyond(waves: torch.Tensor, context: int) -> int:
    """How many RoPE pairs (of wavelengths ``waves``) never complete a turn within ``context`` tokens."""
    return int((waves > context).sum())


def hide_future(bias: torch.Tensor) -> torch.Tensor:
    """A (T, S) bias with NaN on the keys after each query (the causal mask hides them anyway) and on
    any non-finite entry, so a heatmap leaves them blank."""
    t, s = bias.shape
    future = torch.arange(s)[None, :] > torch.arange(t)[:, None] + (s - t)
    return torch.where(future | ~torch.isfinite(bias), torch.full_like(bias, float("nan")), bias)


def smoothing_window(n_tokens: int) -> int:
    """The moving-average width for a per-token loss curve: a sixteenth of it, at least 8 tokens."""
    return max(8, n_tokens // 16)


def moving_average(values, window: int) -> torch.Tensor:
    """(N − window + 1,) means of each run of ``window`` consecutive values (only full windows)."""
    values = torch.as_tensor(values, dtype=torch.float64)
    if window > len(values):
        return values[:0]
    return values.unfold(0, window, 1).mean(-1)


def loss_summary(losses: dict) -> dict[str, list]:
    """Columns of a table of per-token losses by scaling: mean loss and its perplexity exp(mean)."""
    means = [float(torch.as_tensor(v, dtype=torch.float64).mean()) for v in losses.values()]
    return {"scaling": list(losses), "mean loss (nats)": means, "perplexity": [math.exp(m) for m in means]}


def entropy_share(entropy: torch.Tensor) -> torch.Tensor:
    """(H,) each head's attention entropy (H, T) summed over the queries after the first, as a share of
    the even spread's log(i + 1) summed the same way (1: every query spreads evenly over what it sees)."""
    even = uniform_entropy(entropy.shape[-1])[1:].sum()
    return entropy[:, 1:].sum(-1) / even


def permutation_rows(checks: dict[str, tuple]) -> list[dict]:
    """One row per model of a permutation check {name: (sorted scores, sorted shuffled scores, order)}:
    the largest difference between the two sorted sets (0: the same numbers in another order)."""
    return [{"model": name, "max |Δ| between sorted score sets": float((original - shuffled).abs().max())}
            for name, (original, shuffled, _) in checks.items()]
