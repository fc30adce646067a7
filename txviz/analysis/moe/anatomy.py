"""A Mixture-of-Experts config's routing in words: how its router turns scores into k experts and their
gates, which layers have experts at all, and the shared expert every token runs through. The MoE page
shows these beside the measured routing, so a reader knows which router made the numbers
(txviz.model.router holds the routers themselves)."""

from __future__ import annotations

from txviz.config import ModelConfig


def _layers(config: ModelConfig) -> str:
    moe, n = len(config.moe_layers), config.n_layers
    if moe == n:
        return f"in every one of its {n} layers"
    dense = [i for i in range(n) if i not in config.moe_layers]
    listed = ", ".join(map(str, dense[:8])) + (" …" if len(dense) > 8 else "")
    which = f"layers {listed} keep" if len(dense) > 1 else f"layer {listed} keeps"
    return f"in {moe} of its {n} layers ({which} a dense FFN)"


def gate_rule(config: ModelConfig) -> str:
    """How the chosen experts' gates come from the router's scores."""
    k, e = config.top_k, config.n_experts
    bias = " (with a bias)" if config.router_bias else ""
    if config.router_order == "topk_softmax":
        return (f"the {k} largest router logits{bias}, then a softmax over those {k}: the same experts and "
                f"gates as a softmax over all {e} renormalised over the chosen")
    kept = ("renormalised to sum to 1" if config.router_norm == "topk"
            else "as the softmax gives them (they sum to less than 1)")
    return f"a softmax over all {e} router logits{bias}, then the {k} largest, their gates {kept}"


def shared_rule(config: ModelConfig) -> str | None:
    """The shared expert in words, or None without one."""
    if not config.shared_expert_hidden:
        return None
    scale = "scaled per token by a sigmoid gate σ(x·w)" if config.shared_expert_gate else "added with weight 1"
    return (f"a shared expert ({config.shared_expert_hidden} wide) runs on every token, outside the top-"
            f"{config.top_k}, {scale}")


def describe_routing(config: ModelConfig) -> str:
    """One sentence: what the loaded MoE does with each token."""
    k, e = config.top_k, config.n_experts
    sentence = (f"The loaded model routes each token to {k} of {e} experts ({config.expert_width} wide) "
                f"{_layers(config)}: {gate_rule(config)}")
    shared = shared_rule(config)
    return sentence + (f"; and {shared}." if shared else ".")
