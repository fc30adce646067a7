"""The Circuit tab of the Heads page: which heads feed which, through their queries, keys or values, for
a prompt pair, and why one head attends where it does.

Every edge is scored by EAP-IG; the circuit of the top n edges is measured exactly (its faithfulness:
how much of the clean behaviour it restores with every other edge patched from the corrupt prompt). The
run says how long it takes before it starts, reports per batch and stops on a click; it is kept for every
session by (model, texts, words, steps, limits), so a new prompt pair never shows the old graph. A click on
a head opens it in the Attention page and its query–key breakdown below.
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import streamlit as st

from app import cache
from app.figures import circuit_charts
from app.services.circuit import CircuitRequest
from app.services.prompts import PromptError
from app.ui import state
from app.ui.widgets import plain
from txviz.analysis.coref.marks import digest
from txviz.causal.bench import TROPHY
from txviz.circuit.report import ranked_edges, side_totals

MAX_DRAWN = 300  # edges drawn in the graph: beyond, lines hide each other and plotly slows down
EXPORTED = 2000  # edges in the JSON and CSV downloads
RUN = state.StoppableRun("circuit")


def circuit_tab(source: str, loaded, bos: str) -> None:
    st.markdown(
        "**From heads to the circuit between them.** Every *edge* from an earlier node (the embeddings, a head, an "
        "MLP) into a later one — into a head's **query**, **key** or **value** input, an MLP or the logits — is "
        "scored by **EAP-IG** (edge attribution patching with integrated gradients). The circuit of the top *n* "
        "edges is then **measured exactly**: every other edge is patched from the corrupt prompt, and its "
        "**faithfulness** is (metric of the circuit − corrupt) / (clean − corrupt): 1 when the circuit alone "
        "carries the clean behaviour, 0 when it carries none.")
    request = _request(bos)
    if request is None:
        return
    kept = cache.circuit_kept(source, request)
    if kept is None:
        holder = st.empty()  # the estimate, the buttons and the bar: gone once the run is done
        with holder.container():
            kept = _run(source, request)
        if kept is not None:
            holder.empty()
    if kept is not None:
        _show(source, loaded, request, kept)


def _request(bos: str):
    clean_default, corrupt_default, answer_default, wrong_default = TROPHY
    clean = st.text_input("Clean prompt (its answer is explained)", value=clean_default, key="circuit_clean",
                          max_chars=400)
    corrupt = st.text_input("Corrupt prompt (same token count)", value=corrupt_default, key="circuit_corrupt",
                            max_chars=400)
    left, middle, right = st.columns([2, 2, 3])
    answer = left.text_input("Answer word", value=answer_default.strip(), key="circuit_answer", max_chars=40)
    wrong = middle.text_input("Wrong word", value=wrong_default.strip(), key="circuit_wrong", max_chars=40)
    steps = right.select_slider("EAP-IG steps (1 is plain EAP)", options=[1, 2, 3, 5, 8, 10], value=5,
                                key="circuit_steps")
    if not clean.strip() or not corrupt.strip() or not answer.strip() or not wrong.strip():
        st.info("Give both prompts and both words.")
        return None
    return CircuitRequest(clean, corrupt, answer, wrong, bos, int(steps))


def _run(source: str, request):
    """The estimate and the button; a run under a progress bar with its own Stop, or None."""
    stopped = RUN.stopped()
    if stopped is not None:
        st.info(f"Stopped after {stopped['seconds']:.0f} s, at {stopped['message']} ({stopped['fraction']:.0%} of "
                "the work). Nothing of it was kept. Start it again to measure.")
    try:
        estimate = cache.circuit_estimate(source, request)
    except PromptError as error:
        st.warning(plain(str(error)))
        return None
    st.caption(f"It takes {estimate.describe()}.")
    if not st.button("Find the circuit", key="circuit_run", type="primary"):
        return None
    try:
        with RUN.running("Scoring every edge, then measuring circuits", estimate.seconds) as progress:
            return cache.get_circuit(source, request,
                                     lambda done, total: progress(done / max(total, 1), f"batch {done} of at most {total}"))
    except (PromptError, ValueError) as error:
        st.warning(plain(str(error)))
        return None


def _sizes(n_edges: int, curve: list[dict], chosen: int | None) -> list[int]:
    """The slider's stops: 40 sizes spaced geometrically, the curve's and the chosen circuit's."""
    geometric = np.unique(np.round(np.geomspace(1, n_edges, 40)).astype(int)).tolist()
    return sorted(set(geometric) | {p["edges"] for p in curve if p["edges"] > 0} | ({chosen} if chosen else set()))


def _show(source: str, loaded, request, kept) -> None:
    result = kept.result
    pair, graph = result.pair, result.pair.graph
    key = digest(request)
    answer, wrong = kept.words["answer_token"]["text"], kept.words["wrong_token"]["text"]
    first, second, third = st.columns(3)
    first.metric(f"Logit difference “{answer}” − “{wrong}”, clean", f"{pair.clean_metric:+.3f}")
    second.metric("…corrupt", f"{pair.corrupt_metric:+.3f}")
    third.metric("Edges in the graph", f"{graph.n_edges:,}")
    if not pair.clean_metric > 0 > pair.corrupt_metric:
        st.caption(plain(
            f"The pair does not flip the answer: the model prefers “{request.answer if pair.clean_metric > 0 else request.wrong}” "
            f"on the clean prompt and “{request.answer if pair.corrupt_metric > 0 else request.wrong}” on the corrupt one. "
            f"The circuit explains a shift of {abs(pair.clean_metric - pair.corrupt_metric):.3f} in the logit "
            "difference, not a change of answer, and faithfulness (a ratio over that small shift) swings widely."))
    if result.circuit_edges is not None:
        st.markdown(f"The smallest top-n circuit reaching faithfulness {result.target}: **{result.circuit_edges:,} "
                    f"edges** ({result.circuit_edges / graph.n_edges:.1%} of them), measured "
                    f"**{result.circuit_faithfulness:.3f}**.")
    sizes = _sizes(graph.n_edges, result.curve, result.circuit_edges)
    default = result.circuit_edges or min(sizes, key=lambda n: abs(n - 100))
    left, right = st.columns([3, 1])
    n = left.select_slider("Edges in the circuit (the top n by |EAP-IG score|)", options=sizes, value=default,
                           key=f"circuit_edges_{key}")
    measured = cache.circuit_faithfulness(source, request, int(n))
    right.metric("Measured faithfulness", f"{measured:.3f}")
    drawn = ranked_edges(graph, result.scores, min(int(n), MAX_DRAWN))
    title = f"Top {len(drawn):,} edges" + (f" of the {int(n):,} in the circuit" if n > MAX_DRAWN else "")
    event = st.plotly_chart(circuit_charts.circuit_graph(drawn, loaded.config.n_layers, loaded.config.n_heads,
                                                         title=title),
                            key=f"circuit_graph_{key}", on_select="rerun", selection_mode="points")
    st.caption("Solid lines end at a head's query, dashed at its key, dotted at its value (a little below, at and "
               "above the head); red: patching the edge raises the logit difference, blue: lowers it; width: |score|. "
               "Hover an edge's middle for its score; click a head to open it.")
    st.plotly_chart(circuit_charts.faithfulness_curve(result.curve, int(n), measured), key=f"circuit_curve_{key}")
    _clicked_head(event, key)
    _head_section(source, loaded, request, kept, key)
    _export(kept, key)


def _clicked_head(event, key: str) -> None:
    """A click on a head node chooses it for the breakdown (once per click: the widgets stay free after)."""
    points = (event or {}).get("selection", {}).get("points", []) if isinstance(event, dict) else \
        getattr(getattr(event, "selection", None), "points", []) or []
    heads = [circuit_charts.head_of(str(p.get("customdata"))) for p in points if p.get("customdata")]
    heads = [h for h in heads if h is not None]
    if not heads or state.get("_circuit_clicked") == (key, heads[0]):
        return
    state.put("_circuit_clicked", (key, heads[0]))
    state.put(f"circuit_layer_{key}", heads[0][0])
    state.put(f"circuit_head_{key}", heads[0][1])


def _head_section(source: str, loaded, request, kept, key: str) -> None:
    st.subheader("Why a head looks where it looks: the query–key breakdown")
    st.markdown(
        "A head's pre-softmax score of key *j* from query *i* is a dot product of a query built from the residual "
        "stream at *i* and a key built from it at *j*. The residual stream is the sum of every earlier node's "
        "output, so with the norms' scales frozen at this run the score splits exactly into (query-side node, "
        "key-side node) pairs: which upstream heads built the query and the key that meet.")
    config, tokens = loaded.config, kept.clean_tokens
    first_differs = next((i for i, (a, b) in enumerate(zip(kept.clean_tokens, kept.corrupt_tokens)) if a != b), 0)
    cols = st.columns(4)
    layer = cols[0].number_input("Layer", 0, config.n_layers - 1, value=config.n_layers - 1, key=f"circuit_layer_{key}")
    head = cols[1].number_input("Head", 0, config.n_heads - 1, value=0, key=f"circuit_head_{key}")
    label = lambda i: f"{i}: {tokens[i]!r}"  # noqa: E731  (a selectbox shows its options as text)
    query = cols[2].selectbox("Query token (attends)", range(len(tokens)), index=len(tokens) - 1, format_func=label,
                              key=f"circuit_query_{key}")
    keys = list(range(query + 1))
    key_token = cols[3].selectbox("Key token (attended)", keys, index=min(first_differs, query), format_func=label,
                                  key=f"circuit_key_{key}_{query}")
    if st.button(f"Open L{layer} H{head} in the Attention page (the clean prompt)", key=f"circuit_open_{key}",
                 icon=":material/grid_on:", on_click=_open_head, args=(request.clean, layer, head, query)):
        st.switch_page("app_pages/attention/page.py")
    try:
        found = cache.circuit_qk(source, request, int(layer), int(head), int(query), int(key_token))
    except PromptError as error:
        st.warning(plain(str(error)))
        return
    if found is None:
        return
    a, b, c = st.columns(3)
    a.metric("Pre-softmax score (the model's)", f"{found.score:+.4f}")
    b.metric("Sum of the pairs", f"{found.sum:+.4f}")
    c.metric("Attention weight", f"{found.weight:.3f}")
    top = pd.DataFrame(found.top_pairs(15))
    sides = side_totals(found, 8)
    left, right = st.columns(2)
    left.dataframe(top, hide_index=True, key=f"circuit_pairs_{key}")
    left.dataframe(pd.DataFrame({"query-side node": [n["node"] for n in sides["query_side"]],
                                 "its total": [n["value"] for n in sides["query_side"]],
                                 "key-side node": [n["node"] for n in sides["key_side"]],
                                 "its total ": [n["value"] for n in sides["key_side"]]}),
                   hide_index=True, key=f"circuit_sides_{key}")
    right.plotly_chart(circuit_charts.qk_matrix(found.pairs.numpy(), found.query_nodes, found.key_nodes,
                                                title=f"L{layer} H{head}: query side × key side"),
                       key=f"circuit_qk_{key}")
    values = pd.DataFrame(found.top_values(8))
    st.markdown(plain(f"Value side: what L{layer} H{head} copies from token {key_token} ({tokens[key_token]!r}), each "
                      "node's part of the head's output at the query, along that output:"))
    st.dataframe(values, hide_index=True, key=f"circuit_values_{key}")


def _open_head(prompt: str, layer: int, head: int, query: int) -> None:
    """Before the next run draws any widget: the sidebar's prompt becomes the clean prompt, and the
    Attention page's head and query token the ones chosen here."""
    state.put("prompt", prompt)
    state.set_head(int(layer), int(head))
    state.put("query", int(query))


def _export(kept, key: str) -> None:
    report = kept.to_json(EXPORTED)
    edges = pd.DataFrame(report["edges"])
    left, right = st.columns(2)
    left.download_button("Download the circuit (JSON)", json.dumps(report), file_name="circuit.json",
                         mime="application/json", key=f"circuit_json_{key}")
    right.download_button(f"Download the top {len(edges):,} edges (CSV)", edges.to_csv(index=False),
                          file_name="circuit_edges.csv", mime="text/csv", key=f"circuit_csv_{key}")
