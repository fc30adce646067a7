"""The Circuit tab of the Heads page: which heads feed which, through their queries, keys or values, for
a prompt pair, and why one head attends where it does.

Every edge is scored by EAP-IG; the circuit of the top n edges is measured exactly (its faithfulness:
how much of the clean behaviour it restores with every other edge patched from the corrupt prompt). The
run says how long it takes before it starts, reports per batch and stops on a click; it is kept for every
session by (model, texts, words, steps, limits), so a new prompt pair never shows the old graph. A click on
a head opens it in the Attention page and its query–key breakdown below.

This module lays the tab out and offers the downloads; circuit_run holds the estimate, the run and its
Stop, circuit_graph the graph, the edge slider and the faithfulness curve, circuit_qk the breakdown.
"""

from __future__ import annotations

import json

import pandas as pd
import streamlit as st

from app import cache
from app.app_pages.heads import circuit_graph, circuit_qk, circuit_run
from app.services.circuit import CircuitRequest
from txviz.analysis.coref.marks import digest
from txviz.causal.bench import TROPHY

EXPORTED = 2000  # edges in the JSON and CSV downloads


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
            kept = circuit_run.run(source, request)
        if kept is not None:
            holder.empty()
    if kept is not None:
        key = digest(request)
        circuit_graph.graph_section(source, loaded, request, kept, key)
        circuit_qk.head_section(source, loaded, request, kept, key)
        _export(kept, key)


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


def _export(kept, key: str) -> None:
    report = kept.to_json(EXPORTED)
    edges = pd.DataFrame(report["edges"])
    left, right = st.columns(2)
    left.download_button("Download the circuit (JSON)", json.dumps(report), file_name="circuit.json",
                         mime="application/json", key=f"circuit_json_{key}")
    right.download_button(f"Download the top {len(edges):,} edges (CSV)", edges.to_csv(index=False),
                          file_name="circuit_edges.csv", mime="text/csv", key=f"circuit_csv_{key}")
