"""The Circuit tab's graph of a finished run: the clean and corrupt logit differences, the smallest
circuit reaching the target faithfulness, a slider of circuit sizes with the faithfulness of the chosen
top-n circuit measured exactly beside it, the graph of its edges (layered by layer) and the
faithfulness curve. A click on a head node chooses that head for the query–key breakdown."""

from __future__ import annotations

import numpy as np
import streamlit as st

from app import cache
from app.figures import circuit_charts
from app.ui import state
from app.ui.widgets import plain
from txviz.circuit.report import ranked_edges

MAX_DRAWN = 300  # edges drawn in the graph: beyond, lines hide each other and plotly slows down


def graph_section(source: str, loaded, request, kept, key: str) -> None:
    result = kept.result
    pair, graph = result.pair, result.pair.graph
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


def _sizes(n_edges: int, curve: list[dict], chosen: int | None) -> list[int]:
    """The slider's stops: 40 sizes spaced geometrically, the curve's and the chosen circuit's."""
    geometric = np.unique(np.round(np.geomspace(1, n_edges, 40)).astype(int)).tolist()
    return sorted(set(geometric) | {p["edges"] for p in curve if p["edges"] > 0} | ({chosen} if chosen else set()))


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
