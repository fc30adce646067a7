"""Mixture of Experts page (seed §4.2): where the router sends each token, how evenly, what the
balancing loss changes, and what the experts cost — on the loaded model if it is a MoE, else on the
lab zoo's MoE variants."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import streamlit as st

from app import resources
from app.figures import charts
from app.ui import sidebar, state
from app import zoo_resources as zoo
from app.ui.widgets import bounded_slider
from txviz.analysis import moe
from txviz.analysis.tradeoffs import REFERENCES, expert_family, zoo_rows
from txviz.loading.zoo import CURVES_FILE, SHIPPED_ZOO

st.title("Mixture of Experts")
st.markdown(
    "A dense model sends every token through the same feed-forward network. A **Mixture of Experts** "
    "keeps several FFNs side by side and a small linear **router** that scores them for each token; only "
    "the k best-scoring experts run, and their outputs are mixed by the router's weights. Memory holds "
    "every expert, but a token pays for k of them: more capacity at the same compute per token. The catch "
    "is balance: left alone, a router tends to favour the experts that are already good, they get more "
    "gradient and improve further, and the rest go idle. Switch Transformer adds a small loss that is 1 "
    "when assignments f and router probabilities P are spread evenly and grows when they pile up.")
st.latex(r"y=\sum_{e\in\mathrm{TopK}(g(x))} g_e(x)\,\mathrm{FFN}_e(x),\quad g(x)=\mathrm{softmax}(xW_r)"
         r"\qquad \mathcal{L}_{aux}=E\sum_{e=1}^{E} f_e\,P_e,\quad E_{\text{eff}}=e^{-\sum_e f_e\log f_e}")

source, loaded = sidebar.current()
zoo_moe = zoo.trained(zoo.MOE_VARIANTS)
ABOUT = {row["variant"]: row.get("about", "") for row in zoo_rows(zoo.MOE_VARIANTS)}


def _variant_label(name: str) -> str:
    return f"{name} — {ABOUT.get(name, '').removeprefix('txviz lab zoo: ')}"


TABS = ("Routing on a text", "Balanced vs unbalanced", "Capacity vs compute")


def _moe_variant() -> str | None:
    """The zoo variant the routing and cost tabs show while the loaded model is dense (chosen above the
    tabs, so both follow it whichever is open), or None: the loaded model is a MoE, or the zoo has none."""
    if loaded.config.is_moe or not zoo_moe:
        return None
    return st.selectbox("Zoo variant", zoo_moe, key="moe_variant", format_func=_variant_label,
                        help="The loaded model has a dense FFN: the routing and cost tabs show this tiny MoE instead.")


def _routed_text(name: str | None):
    """(model name, its config, tokens, router trace) of the text to show, or None without a MoE."""
    if loaded.config.is_moe:
        config = loaded.config
        gates = "renormalized over the chosen" if config.router_norm == "topk" else "as the softmax gives them"
        st.caption(f"The loaded model routes each token to {config.top_k} of {config.n_experts} experts (gates {gates}).")
        _, _, traced = sidebar.prompt_trace(capture=moe.ROUTER_CAPTURES)
        return resources.display_name(loaded), config, list(traced.tokens), traced.trace
    if name is None:
        st.info("The loaded model has a dense FFN and the zoo has no trained MoE variant yet (`txviz lab train moe_top1`).")
        return None
    st.caption("The loaded model has a dense FFN, so here are the lab's tiny MoE variants instead (trained "
               "on generated stories; open one in the sidebar to use it everywhere).")
    text_choice = st.radio("Text", ["held-out story", "sidebar prompt"], key="moe_text", horizontal=True,
                           help="The zoo's word-level vocabulary is its stories': other words become <|unk|>.")
    text = zoo.first_story() if text_choice == "held-out story" else state.get("prompt")
    tokens, tr = zoo.zoo_text_trace(name, text)
    unknown = sum(t == "<|unk|>" for t in tokens)
    if unknown:
        st.caption(f"{unknown} of {len(tokens)} tokens are outside the zoo's vocabulary (<|unk|>).")
    return name, zoo.zoo_model(name).config, list(tokens), tr


def _show_routing(name: str, config, tokens: list[str], tr) -> None:
    routing = moe.routing(tr, batch=0)
    m1, m2, m3, m4 = st.columns(4)
    m1.metric("Effective experts (mean over layers)",
              f"{float(routing.effective_experts.mean()):.2f} of {routing.n_experts}")
    m2.metric("Aux loss (mean)", f"{float(routing.aux_loss.mean()):.3f}", help="1 = perfectly even routing")
    m3.metric("Router entropy", f"{float(routing.entropy.mean()):.2f} nats",
              help=f"log E = {np.log(routing.n_experts):.2f} nats for a router that cannot decide")
    m4.metric("Load CV (mean)", f"{float(routing.cv.mean()):.2f}", help="std/mean of the expert shares; 0 = even")
    left, right = st.columns([3, 2])
    left.plotly_chart(charts.expert_map(routing.expert_ids.permute(1, 0, 2).numpy(),
                                        routing.gates.permute(1, 0, 2).numpy(), tokens, routing.n_experts,
                                        layers=list(routing.layers), title=f"{name}: best expert per token and layer "
                                        "(hover: every chosen expert, with its gate)"), key="moe_map")
    last = len(routing.layers) - 1
    layer = bounded_slider(right, "Layer", 0, last, min(int(state.get("layer")), last), key="moe_layer")
    probs = routing.probs[layer].sort(dim=-1, descending=True).values.numpy()  # (T, E) best first
    ranks = ["best", "second", "third", "fourth"][:min(routing.n_experts, routing.top_k + 1)]
    right.plotly_chart(charts.histograms({f"{rank} expert": probs[:, r] for r, rank in enumerate(ranks)},
                                         x_range=(0.0, 1.0), bins=20, x_title="router probability",
                                         title=f"Layer {routing.layers[layer]}: router probability by rank"),
                       key="moe_gates")
    right.caption(f"The top {routing.top_k} run; their gates are these probabilities"
                  + (" renormalized to sum to 1." if config.router_norm == "topk" else "."))
    right.plotly_chart(charts.expert_load_bars(routing.load.numpy(), layers=list(routing.layers),
                                               title="Share of this text's assignments per expert"), key="moe_load_text")
    st.dataframe(pd.DataFrame(routing.summary()), hide_index=True)


def _curves(name: str) -> dict:
    return json.loads((SHIPPED_ZOO / name / CURVES_FILE).read_text(encoding="utf-8"))


def _balance_row(name: str, measured: moe.Routing) -> dict:
    return {"variant": name, "balancing weight": _curves(name).get("train_settings", {}).get("aux_weight"),
            "effective experts (mean)": float(measured.effective_experts.mean()),
            "effective experts (worst layer)": float(measured.effective_experts.min()),
            "busiest expert's share": float(measured.load.max()), "aux loss (mean)": float(measured.aux_loss.mean()),
            "load CV (mean)": float(measured.cv.mean()), "router entropy (nats)": float(measured.entropy.mean()),
            "val loss": zoo_rows([name])[0]["val_loss"]}


def _compare(names: list[str]) -> None:
    """The trained variants among ``names`` side by side on the same held-out tokens."""
    measured = {name: zoo.zoo_routing(name) for name in names}
    st.dataframe(pd.DataFrame([_balance_row(name, m) for name, m in measured.items()]), hide_index=True)
    st.caption(f"Measured live on {next(iter(measured.values())).n_tokens:,} held-out tokens; val loss from the "
               "lab's eval.json.")
    for column, (name, m) in zip(st.columns(len(measured)), measured.items()):
        column.plotly_chart(charts.expert_load_bars(m.load.numpy(), title=name), key=f"moe_load_{name}")
    c1, c2 = st.columns(2)
    c1.plotly_chart(charts.lines(list(next(iter(measured.values())).layers),
                                 {n: m.effective_experts.numpy() for n, m in measured.items()}, mode="lines+markers",
                                 title="Effective experts per layer", x_title="layer", y_title="experts"),
                    key="moe_effective")
    aux = {name: _curves(name).get("aux_loss") for name in measured}
    aux = {name: values for name, values in aux.items() if values}
    if aux:
        c2.plotly_chart(charts.lines(range(1, max(len(v) for v in aux.values()) + 1), aux, x_title="step",
                                     title="Balancing loss during training (1 = even)", y_title="aux loss"),
                        key="moe_aux_curve")


def _costs(own) -> None:
    table = []
    for c in (own, REFERENCES["mistral-7b"], REFERENCES["mixtral-8x7b"]):
        cap = moe.capacity(c, context=c.max_seq_len // 2)
        table.append({"model": c.name, "experts": f"{c.top_k} of {c.n_experts}" if c.is_moe else "dense",
                      "total params": cap.total_params, "active params": cap.active_params,
                      "active share": f"{cap.active_share:.0%}", "FLOPs/token": cap.flops_per_token,
                      "total params per FLOP": round(cap.params_per_flop, 3)})
    st.dataframe(pd.DataFrame(table), hide_index=True)
    st.caption("FLOPs at half the model's context (the mean number of keys over a full window).")
    family = expert_family(own, context=own.max_seq_len // 2)
    st.plotly_chart(charts.lines([r["experts"] for r in family], {
        "total params": [r["total_params"] for r in family], "active params": [r["active_params"] for r in family],
        "FLOPs/token": [r["flops_per_token"] for r in family]}, log_x=True, log_y=True, mode="lines+markers",
        title=f"{own.name} with E experts of the same width (top-{family[-1]['top_k']})", x_title="experts E"),
        key="moe_family")


def _findings() -> None:
    """Each routing's balanced-vs-unbalanced comparison in words, from the effective experts measured live."""
    for k in (1, 2):
        pair = [f"moe_top{k}", f"moe_top{k}_balanced"]
        if zoo.trained(pair) == pair:
            without, with_loss = (zoo.zoo_routing(name) for name in pair)
            st.markdown("- " + moe.balance_finding(k, without.n_experts, without.effective_experts.tolist(),
                                                    with_loss.effective_experts.tolist()))


def routing_tab() -> None:
    routed = _routed_text(variant)
    if routed is not None:
        _show_routing(*routed)


def balance_tab() -> None:
    st.markdown(
        "The zoo trains each MoE twice, identical but for the balancing loss (weight 0.01, as in Switch). "
        "Both are run below on the same held-out stories the models never trained on.")
    _findings()
    kind = st.segmented_control("Routing", ["top-1", "top-2"], key="moe_pair",
                                format_func=lambda k: {"top-1": "top-1 (Switch)", "top-2": "top-2 (Mixtral)"}[k])
    pair = [f"moe_top{(kind or 'top-1')[-1]}", f"moe_top{(kind or 'top-1')[-1]}_balanced"]
    present = zoo.trained(pair)
    missing = [name for name in pair if name not in present]
    if missing:
        st.info("Not trained yet: " + ", ".join(missing) + f" (`txviz lab train {' '.join(missing)}`).")
    if present:
        _compare(present)


def cost_tab() -> None:
    st.markdown("All experts sit in memory; a token runs through the router and k of them. FLOPs count two per "
                "multiply-add of the weights a token meets, plus QKᵀ and A·V over the keys it attends.")
    st.latex(r"N_{\text{total}} = N_{\text{attn}} + E\,N_{\text{expert}},\quad N_{\text{active}} = N_{\text{attn}} + "
             r"k\,N_{\text{expert}},\quad \text{FLOPs/token}\approx 2N_{\text{active,matmul}} + 4\,L\,H\,d_{head}\,n")
    _costs(zoo.zoo_model(variant).config if variant is not None else loaded.config)


for key, default in (("moe_text", "held-out story"), ("moe_pair", "top-1")):  # kept while another tab is open
    st.session_state[key] = st.session_state.get(key, default)
variant = _moe_variant()
st.caption("Only the open tab is computed.")
for tab, draw in zip(st.tabs(list(TABS), key="moe_tab", on_change="rerun"), (routing_tab, balance_tab, cost_tab)):
    with tab:
        if tab.open is not False:  # None: state tracking off (never here)
            draw()
