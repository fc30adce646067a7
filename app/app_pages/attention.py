"""Attention page (seed §1–§2): every head of the loaded model on your prompt."""

from __future__ import annotations

import numpy as np
import streamlit as st
import torch

from app import resources
from app.figures import charts
from app.ui import sidebar, state
from app.ui.widgets import bounded_slider, picked_customdata
from txviz.analysis import export
from txviz.analysis.heads import METRICS, hide_sink
from txviz.analysis.steps import attention_steps, entropy
from txviz.loading.token_text import readable_tokens

STRIP_OPEN_TOKENS = 200  # a longer prompt's token strip starts folded
STRIP_HEIGHT_PX = 220  # past this the strip scrolls

METRIC_HELP = {
    "entropy": "spread of the weights (nats); low = focused",
    "first_token_mass": "weight on the first token (the attention sink)",
    "prev_token": "weight on the token just before",
    "duplicate_token": "weight on earlier copies of the same token",
    "induction": "weight on the token after an earlier copy (induction heads)",
    "max_weight": "largest weight per row",
}
UNDEFINED_HELP = {  # why a metric can have no value on a prompt (the mean over no rows)
    "entropy": "the prompt has a single token", "first_token_mass": "the prompt has a single token",
    "max_weight": "the prompt has a single token", "prev_token": "the prompt has a single token",
    "duplicate_token": "no token of this prompt repeats an earlier one",
    "induction": "no token of this prompt repeats an earlier one (with a token before it)",
}


def step_by_step(source: str, prompt: str, bos: str, tokens: list[str], n_groups: int, layer: int, head: int,
                 query: int) -> None:
    """QKᵀ → ÷√d_k → mask → softmax → ·V recomputed from this layer's captured q, k, v."""
    layer_trace = resources.get_trace(source, prompt, bos, capture=("q_rot", "k_rot", "v", "attn_probs"),
                                      layers=(layer,)).trace
    steps = attention_steps(layer_trace.get("q_rot", layer)[0], layer_trace.get("k_rot", layer)[0],
                            layer_trace.get("v", layer)[0], head, n_groups=n_groups)
    diff = float((steps.probs - layer_trace.attn(layer, head)).abs().max())
    t, d = steps.q.shape
    st.markdown(
        f"Q is **{t} × {d}** (tokens × d_k), K is **{steps.k.shape[0]} × {d}**, so QKᵀ is **{t} × {t}**; "
        f"d_k = {d}, so the scores are multiplied by 1/√{d} = {steps.scale:.4f}. "
        f"Recomputed from the captured q, k, v, the weights differ from the model's own by at most **{diff:.1e}**.")
    labels = charts.token_labels(tokens)  # rows: queries; columns: keys (or the head's d_k dimensions)
    square = dict(x=labels, y=labels)
    a, b = st.columns(2)
    a.plotly_chart(charts.matrix(steps.raw.numpy(), title="1. QKᵀ (raw dot products)", **square), key="step_raw")
    b.plotly_chart(charts.matrix(steps.masked.numpy(), title="2–3. ÷√d_k, then the causal mask (grey = −∞)",
                                 **square), key="step_masked")
    a.plotly_chart(charts.matrix(steps.probs.numpy(), title="4. softmax (rows sum to 1)", colorscale="Blues",
                                 symmetric=False, **square), key="step_probs")
    b.plotly_chart(charts.matrix(steps.output.numpy(), title=f"5. weights · V → {t} × {d} output of this head",
                                 x=[f"d{i}" for i in range(d)], y=labels), key="step_out")
    st.markdown(f"**Without the √d_k scaling**, row {query} ({tokens[query]!r}): the softmax gets sharper "
                f"(entropy {float(entropy(steps.probs[query])):.2f} → {float(entropy(steps.unscaled_probs[query])):.2f} nats), "
                "and saturated softmaxes have tiny gradients, which is why the scaling is there.")
    st.plotly_chart(charts.softmax_with_and_without_scaling(steps.probs[query, : query + 1].numpy(),
                                                            steps.unscaled_probs[query, : query + 1].numpy(),
                                                            tokens[: query + 1]), key="step_softmax")


st.title("Attention")
st.markdown(
    "Every token asks a question (its **query** q), every token advertises what it holds (its **key** k), "
    "and the answer is a blend of the tokens' **values** v, weighted by how well query and key match. "
    "A causal decoder may only look back, so the weights above the diagonal are forced to zero. "
    "Each head does this with its own projections, so each can look for something different.")
st.latex(r"\mathrm{Attention}(Q,K,V)=\mathrm{softmax}\!\Big(\frac{QK^\top}{\sqrt{d_k}}+M\Big)V,\qquad "
         r"M_{ij}=\begin{cases}0 & j\le i\\ -\infty & j>i\end{cases}")

source, loaded = sidebar.current()
config = loaded.config
prompt, bos = state.get("prompt"), state.get("bos")
try:
    traced, plan = resources.get_attention_trace(source, prompt, bos)
except resources.PromptError as error:
    st.warning(str(error))
    st.stop()
n = traced.n_tokens
n_layers = len(traced.trace.layers)  # a budget too small for every layer keeps the leading ones
if n_layers < config.n_layers:
    state.clamp_head(n_layers, config.n_heads)
big = n > charts.MAX_MAP_CELLS  # drawn pooled, with a full-resolution region beside it
# a character a byte-level BPE split over tokens ("\xf0\x9f" + "\x98\x80") is shown whole on the token ending it
shown = readable_tokens([loaded.tokenizer.token_bytes(i) for i in traced.ids], traced.special, traced.tokens)
tokens = [token.text for token in shown]
strip = charts.token_strip_html(tokens, list(traced.special), titles=[t.tooltip(i) for i, t in enumerate(shown)],
                                max_height_px=STRIP_HEIGHT_PX)
if n <= STRIP_OPEN_TOKENS:
    st.markdown(strip, unsafe_allow_html=True)
else:  # a long prompt's strip would push every chart off the screen
    with st.expander(f"The {n:,} tokens (scrolls)", expanded=False):
        st.markdown(strip, unsafe_allow_html=True)
st.caption(f"{n:,} tokens · the whole model ran once in {traced.seconds * 1000:,.0f} ms and every "
           f"{config.n_layers} × {config.n_heads} map below comes from that run. "
           f"Policy before the prompt: **{state.BOS_POLICIES[bos]}** (sidebar).")
if plan is not None:
    from txviz.capture.cost import capture_cost
    from txviz.limits import format_bytes

    full = capture_cost(config, n, ("attn_probs",), element_bytes=loaded.dtype.itemsize)
    st.info(f"**A long prompt: cost-aware capture.** Keeping every map would take "
            f"{format_bytes(full.stored_bytes)} ({config.n_layers} layers × {config.n_heads} heads × {n:,}² × "
            f"{loaded.dtype.itemsize} bytes); this trace keeps **{format_bytes(plan.cost.stored_bytes)}**: "
            f"{plan.reason}. Every head's metrics come from per-row summaries computed during the pass and "
            "equal those of the full maps to float32 rounding (tested); "
            + ("a head's map is rebuilt from the kept queries and keys when you open it, equal to the model's "
               "own to float32 rounding." if "q_rot" in plan.capture else
               "the maps are kept in float16 (about 3 significant digits)." if plan.maps.dtype == torch.float16
               else "the maps are the model's own."))


@st.fragment
def head_explorer() -> None:
    """The grid, one head's map, the head view and the step-by-step: a fragment, so the layer slider's
    arrow keys, a click on the grid or a new query token rerun these charts, not the whole page."""
    # A click on the overview grid picks a head: apply it before the layer/head widgets are drawn.
    picked = picked_customdata(st.session_state.get("head_grid"))
    if picked is not None:
        pick = tuple(int(v) for v in picked)
        if pick != st.session_state.get("_grid_pick"):
            st.session_state["_grid_pick"] = pick
            state.set_head(*pick)
    left, right = st.columns([2, 3], gap="medium")
    with left:
        st.subheader("All heads")
        metric = st.selectbox("Colour by", METRICS, key="grid_metric", format_func=lambda m: f"{m} — {METRIC_HELP[m]}")
        grid = resources.head_metric_grid(table, metric)
        st.plotly_chart(charts.head_grid(grid, metric=metric, selected=(state.get("layer"), state.get("head"))),
                        key="head_grid", on_select="rerun", selection_mode="points")
        st.caption("Click a cell to open that head" + (" (grey: undefined for this prompt)." if np.isnan(grid).any() else "."))
    with right:
        layer, head, hide = head_map()
    head_view(layer, head, hide)
    # lazy: the step-by-step runs (one more traced pass of this layer) only while the expander is open
    steps_box = st.expander("Step by step on the real tensors: QKᵀ → ÷√d_k → mask → softmax → ·V", expanded=False,
                            key="steps_open", on_change="rerun")
    with steps_box:
        if steps_box.open and big:  # four T × T matrices: only where the map itself is drawn cell by cell
            st.info(f"Step by step draws every intermediate T × T matrix cell by cell, so it is shown for prompts of "
                    f"up to {charts.MAX_MAP_CELLS} tokens; this one has {n:,}.")
        elif steps_box.open:
            step_by_step(source, prompt, bos, tokens, config.n_groups, layer, head, query_index())
    with_map = plan is None  # a long prompt's map would be hundreds of megabytes of JSON
    st.download_button(  # data is a function: the JSON is written when the button is pressed, not on every rerun
        "Download this trace (JSON: tokens, every head's metrics" + (", this head's map)" if with_map else ")"),
        lambda: export.trace_json(model=source, prompt=prompt, bos=bos, ids=traced.ids, tokens=traced.tokens,
                                  offsets=traced.offsets, head_rows=head_rows(),
                                  maps={(layer, head): traced.trace.attn(layer, head)} if with_map else {}),
        file_name=f"txviz-trace-L{layer}H{head}.json", mime="application/json", key="download_trace", on_click="ignore")
    state.sync_url()  # a rerun of this fragment alone does not pass through main.py's sync


def head_map() -> tuple[int, int, bool]:
    """The layer/head/hide-sink widgets and the chosen head's map (pooled, with an exact region, when long)."""
    c1, c2, c3 = st.columns([2, 1, 1])
    bounded_slider(c1, "Layer", 0, n_layers - 1, key="layer")
    c2.number_input("Head", 0, config.n_heads - 1, key="head")
    hide = c3.toggle("Hide sink", key="hide_sink",
                     help="Drop the weight on the first token and renormalize the rest of each row.")
    layer, head = int(state.get("layer")), int(state.get("head"))
    kv_head = head // config.n_groups
    title = (f"Layer {layer}, head {head} (shares KV head {kv_head} with {config.n_groups - 1} other"
             f"{'s' if config.n_groups != 2 else ''})" if config.n_groups > 1 else f"Layer {layer}, head {head}")
    if not big:
        probs = traced.trace.attn(layer, head)
        drawn = hide_sink(probs) if hide else probs
        st.plotly_chart(charts.attention_heatmap(drawn.numpy(), tokens, tokens, title=title), key="heatmap")
    else:
        pooled, block = resources.get_map_overview(source, prompt, bos, layer, head, hide)
        st.plotly_chart(charts.pooled_attention(pooled, block, n, title=title), key="heatmap")
        size = min(64, n)
        r1, r2 = st.columns(2)
        q0 = r1.number_input("Region: first query", 0, n - size, n - size, step=size // 2, key="region_query")
        k0 = r2.number_input("Region: first key", 0, n - size, max(0, int(q0) - size // 2), step=size // 2,
                             key="region_key")
        q0, k0 = int(q0), int(k0)
        rows = traced.trace.attn(layer, head, rows=slice(q0, q0 + size))  # exact weights, only these rows
        rows = hide_sink(rows) if hide else rows
        st.plotly_chart(charts.attention_region(rows[:, k0:k0 + size].numpy(), tokens[q0:q0 + size],
                                                tokens[k0:k0 + size], q_offset=q0, k_offset=k0,
                                                title=f"Exact weights: queries {q0}–{q0 + size - 1} × keys {k0}–{k0 + size - 1}"),
                        key="heatmap_region")
        st.caption(f"The whole {n:,} × {n:,} map is drawn as {pooled.shape[0]} × {pooled.shape[1]} cells "
                   f"(the largest weight in each {block} × {block} block); the region below it shows the exact "
                   "weights of the rows and keys you pick.")
    row = table[(table["layer"] == layer) & (table["head"] == head)].iloc[0]
    st.caption(" · ".join(f"{m} {row[m]:.3f}" for m in METRICS if row[m] is not None and row[m] == row[m]))
    return layer, head, hide


def query_index() -> int:
    """The head view's query token; the URL's "query" is -1 for the last token, whatever the length."""
    query = int(state.get("query"))
    return n - 1 if not 0 <= query < n else query


def _pick_query() -> None:
    picked = int(st.session_state["query_token"])
    st.session_state["query"] = -1 if picked == n - 1 else picked


def head_view(layer: int, head: int, hide: bool) -> None:
    st.subheader("Head view")
    st.session_state["query_token"] = query_index()  # the slider shows the shared query (from a link too)
    query = st.select_slider("Query token", options=list(range(n)), key="query_token", on_change=_pick_query,
                             format_func=lambda i: f"{i}: {tokens[i]}")
    query_row = traced.trace.attn(layer, head, rows=slice(query, query + 1))
    query_row = (hide_sink(query_row) if hide else query_row)[0]
    st.plotly_chart(charts.head_view(query_row.numpy(), tokens, query), key="head_view")
    st.caption(f"Lines from {tokens[query]!r} to the keys it reads, thicker = more weight (top 24).")


def head_rows() -> list[dict]:
    return [{k: (None if v != v else v) for k, v in row.items()} for row in table.to_dict("records")]


table = resources.get_head_table(source, prompt, bos).astype({m: float for m in METRICS})  # undefined: NaN, not None
state.reset_on_change("query", (source, prompt, bos))  # a token index means nothing in another prompt
head_explorer()

st.subheader("Every head, sortable")
undefined = [m for m in METRICS if table[m].isna().any()]
st.dataframe(table, hide_index=True, key="head_table", placeholder="—",  # a missing number, not "None"
             column_config={m: st.column_config.NumberColumn(m, help=METRIC_HELP[m] + (
                 f". “—” where undefined: {UNDEFINED_HELP[m]}" if m in undefined else ""), format="%.3f")
                 for m in METRICS})
st.download_button("Download the table (CSV)", table.to_csv(index=False), file_name="heads.csv", mime="text/csv",
                   on_click="ignore")
