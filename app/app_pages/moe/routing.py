"""The "Routing on a text" tab: the best expert of each token in each layer, how sure the router is,
and how the text's assignments spread over the experts — on the loaded MoE, or on a zoo MoE variant
(picked above the tabs) while the loaded model is dense."""

from __future__ import annotations

import html

import numpy as np
import streamlit as st

from app import cache
from app.app_pages.moe.view import MoeView
from app.figures import tradeoff_charts
from app.services.zoo import MOE_VARIANTS, first_story, trained
from app.ui import sidebar, state
from txviz.analysis.moe import routing as moe
from txviz.analysis.moe import tables
from txviz.analysis.moe.anatomy import describe_routing, gate_rule
from txviz.analysis.tradeoffs.zoo_results import zoo_rows
from txviz.loading.display_name import display_name


def pick_variant(loaded) -> str | None:
    """The zoo variant the routing and cost tabs show while the loaded model is dense (chosen above the
    tabs, so both follow it whichever is open), or None: the loaded model is a MoE, or the zoo has none."""
    variants = trained(MOE_VARIANTS)
    if loaded.config.is_moe or not variants:
        return None
    about = {row["variant"]: row.get("about", "") for row in zoo_rows(MOE_VARIANTS)}
    return st.selectbox("Zoo variant", variants, key="moe_variant",
                        format_func=lambda name: f"{name} — {about.get(name, '').removeprefix('txviz lab zoo: ')}",
                        help="The loaded model has a dense FFN: the routing and cost tabs show this tiny MoE instead.")


def routing_tab(view: MoeView) -> None:
    routed = routed_text(view)
    if routed is not None:
        show_routing(*routed)


def routed_text(view: MoeView):
    """(model name, its config, tokens, router trace) of the text to show, or None without a MoE."""
    if view.loaded.config.is_moe:
        config = view.loaded.config
        st.caption(describe_routing(config))  # the loaded model's own router, read from its config
        if not config.moe_layers:
            st.info("Every layer of this model keeps a dense FFN: no router runs.")
            return None
        # a dense layer has no router: only the MoE layers are traced
        _, _, traced = sidebar.prompt_trace(capture=moe.router_captures(config), layers=config.moe_layers)
        return display_name(view.loaded), config, list(traced.tokens), traced.trace
    if view.variant is None:
        st.info("The loaded model has a dense FFN and the zoo has no trained MoE variant yet (`txviz lab train moe_top1`).")
        return None
    st.caption("The loaded model has a dense FFN, so here are the lab's tiny MoE variants instead (trained "
               "on generated stories; open one in the sidebar to use it everywhere).")
    text_choice = st.radio("Text", ["held-out story", "sidebar prompt"], key="moe_text", horizontal=True,
                           help="The zoo's word-level vocabulary is its stories': other words become <|unk|>.")
    text = first_story() if text_choice == "held-out story" else state.get("prompt")
    tokens, tr = cache.zoo_text_trace(view.variant, text)
    unknown = sum(t == "<|unk|>" for t in tokens)
    if unknown:
        st.caption(f"{unknown} of {len(tokens)} tokens are outside the zoo's vocabulary (<|unk|>).")
    return view.variant, cache.zoo_model(view.variant).config, list(tokens), tr


def show_routing(name: str, config, tokens: list[str], tr) -> None:
    routing = moe.routing(tr, batch=0)
    m1, m2, m3, m4 = st.columns(4)
    m1.metric("Effective experts (mean over layers)",
              f"{float(routing.effective_experts.mean()):.2f} of {routing.n_experts}")
    m2.metric("Aux loss (mean)", f"{float(routing.aux_loss.mean()):.3f}", help="1 = perfectly even routing")
    m3.metric("Router entropy", f"{float(routing.entropy.mean()):.2f} nats",
              help=f"log E = {np.log(routing.n_experts):.2f} nats for a router that cannot decide")
    m4.metric("Load CV (mean)", f"{float(routing.cv.mean()):.2f}", help="std/mean of the expert shares; 0 = even")
    left, right = st.columns([3, 2])
    shared = shared_gates(config, routing)  # (L, N) or None: the shared expert's gate on every token
    left.plotly_chart(tradeoff_charts.expert_map(routing.expert_ids.permute(1, 0, 2).numpy(),
                                        routing.gates.permute(1, 0, 2).numpy(), tokens, routing.n_experts,
                                        layers=list(routing.layers), shared_gates=None if shared is None else shared.T,
                                        title=f"{html.escape(name)}: best expert per token and layer"), key="moe_map")
    left.caption("Hover a cell: every expert the token was sent to in that layer, with its gate"
                 + (", and the shared expert that runs on every token." if shared is not None else "."))
    layer = routing.layers.index(pick_layer(right, routing.layers))  # an index into the routed layers
    right.plotly_chart(tradeoff_charts.histograms(tables.ranked_probabilities(routing, layer), x_range=(0.0, 1.0), bins=20,
                                         x_title="router probability",
                                         title=f"Layer {routing.layers[layer]}: router probability by rank"),
                       key="moe_gates")
    right.caption(f"The top {routing.top_k} run. This router takes {gate_rule(config)}.")
    if routing.shared_gates is not None:
        right.plotly_chart(tradeoff_charts.histograms({"shared expert's gate": shared[layer]}, x_range=(0.0, 1.0),
                                                      bins=20, x_title="σ(x·w)",
                                                      title=f"Layer {routing.layers[layer]}: the shared expert's "
                                                            "gate, on every token"), key="moe_shared_gates")
    if shared is not None:
        right.caption("The shared expert is not one of the routed experts and not in the shares below: it runs "
                      "on every token, its output scaled by " + ("this gate." if routing.shared_gates is not None
                                                                  else "1."))
    right.plotly_chart(tradeoff_charts.expert_load_bars(routing.load.numpy(), layers=list(routing.layers),
                                               title="Share of this text's assignments per expert"), key="moe_load_text")
    st.dataframe(routing.summary(), hide_index=True)


def shared_gates(config, routing: moe.Routing) -> np.ndarray | None:
    """(L, N) the weight of the shared expert on each token: its captured sigmoid gate, 1 for an ungated
    one; None without a shared expert."""
    if routing.shared_gates is not None:
        return routing.shared_gates.numpy()
    return np.ones(routing.probs.shape[:2]) if config.shared_expert_hidden else None


def pick_layer(container, layers: tuple[int, ...]) -> int:
    """One of the model's routed layers (a MoE model may keep some dense), the one nearest the page's
    layer to start; the widget is keyed by the layers, so another model's choice never carries over."""
    nearest = min(layers, key=lambda layer: abs(layer - int(state.get("layer"))))
    if len(layers) == 1:
        container.caption(f"Layer {layers[0]}, the one routed layer")
        return layers[0]
    return container.select_slider("Layer", options=list(layers), value=nearest,
                                   key="moe_layer_" + "_".join(map(str, layers)))
