"""Parameter counts from shapes: the pieces a decoder layer is made of (attention projections, a
plain or gated MLP, norms, a router and experts), each counted as its module holds them, so that a
family reader only says which pieces it has."""

from __future__ import annotations

from dataclasses import dataclass, field

NORM_PARAMS = {"rms": 1, "layernorm": 2, "layernorm_nobias": 1, "none": 0}  # weights per channel


def norm(kind: str, width: int) -> int:
    return NORM_PARAMS[kind] * width


def linear(n_in: int, n_out: int, bias: bool = False) -> int:
    return n_in * n_out + (n_out if bias else 0)


def attention(d_model: int, n_heads: int, kv_heads: int, head_dim: int, *, qkv_bias: bool, out_bias: bool) -> int:
    """Q, K, V and output projections (fused or not, the count is the same)."""
    q, kv = n_heads * head_dim, kv_heads * head_dim
    return linear(d_model, q + 2 * kv, qkv_bias) + linear(q, d_model, out_bias)


def mlp(d_model: int, width: int, *, gated: bool, bias: bool) -> int:
    """Gated (SwiGLU/GeGLU: gate, up, down) or plain (up, down)."""
    ups = 2 if gated else 1
    return ups * linear(d_model, width, bias) + linear(width, d_model, bias)


# Where parameters sit, as quantization schemes tell them apart (txviz.geometry.quantization):
# the embedding table and output head, the attention projections, dense MLPs and shared experts, routed
# experts, routers, and the small tensors (norm weights, biases) every scheme leaves unquantized.
GROUPS = ("embeddings", "attention", "mlp", "experts", "router", "small")


@dataclass
class Tally:
    """Running totals: all parameters, those one token runs through, those no token multiplies as
    a matrix (looked-up embedding tables, norm weights, biases: no matmul FLOPs), and each ``GROUPS``'s."""

    total: int = 0
    active: int = 0
    unmultiplied: int = 0
    groups: dict[str, int] = field(default_factory=lambda: dict.fromkeys(GROUPS, 0))

    def add(self, count: int, group: str, *, active: bool = True, multiplied: bool = True) -> None:
        self.total += count
        self.active += count if active else 0
        self.unmultiplied += 0 if multiplied else count
        self.groups[group] += count

    def biased(self, with_bias: int, without_bias: int, group: str) -> None:
        """A layer's matrices (multiplied, in ``group``) and its biases (not; small tensors)."""
        self.add(without_bias, group)
        self.add(with_bias - without_bias, "small", multiplied=False)

    def experts(self, count: int, each: int, used: int) -> None:
        """``count`` routed experts of ``each`` parameters, ``used`` of them run per token."""
        self.total += count * each
        self.active += used * each
        self.groups["experts"] += count * each
