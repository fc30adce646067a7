"""The Circuit tab's figures as data: every edge drawn once, q/k/v told apart, sign in the colour, the
heads clickable by name, the breakdown matrix picking the largest nodes."""

from __future__ import annotations

import numpy as np

from app.figures import circuit_charts

EDGES = [{"source": "embed", "target": "a0.h1", "input": "q", "score": 0.5},
         {"source": "a0.h1", "target": "a1.h0", "input": "k", "score": -2.0},
         {"source": "a0.h1", "target": "a1.h0", "input": "v", "score": 0.1},
         {"source": "m0", "target": "logits", "input": None, "score": 1.0}]


def test_each_edge_is_one_segment_styled_by_its_input_and_sign():
    fig = circuit_charts.circuit_graph(EDGES, n_layers=2, n_heads=2)
    lines = [t for t in fig.data if t.mode == "lines"]
    assert sum(list(t.x).count(None) for t in lines) == len(EDGES)
    styles = {(t.line.dash, t.line.color) for t in lines}
    assert ("dash", circuit_charts.NEGATIVE) in styles and ("dot", circuit_charts.POSITIVE) in styles
    assert ("solid", circuit_charts.POSITIVE) in styles
    widest = max(lines, key=lambda t: t.line.width)
    assert widest.line.dash == "dash"  # the largest |score|, the k edge, is drawn widest
    k_end = next(t for t in lines if t.line.dash == "dash").y[1]
    v_end = next(t for t in lines if t.line.dash == "dot").y[1]
    assert k_end != v_end  # the two inputs of a1.h0 end at different points


def test_nodes_carry_their_names_and_edges_their_scores_on_hover():
    fig = circuit_charts.circuit_graph(EDGES, n_layers=2, n_heads=2)
    nodes = next(t for t in fig.data if t.name == "nodes")
    assert set(nodes.customdata) == {"embed", "a0.h1", "a1.h0", "m0", "logits"}
    hover = next(t for t in fig.data if t.name == "edges").hovertext
    assert any("a0.h1 → a1.h0 (k)" in h and "-2.0000" in h for h in hover)
    assert circuit_charts.head_of("a12.h3") == (12, 3) and circuit_charts.head_of("m3") is None


def test_the_matrix_keeps_the_largest_rows_and_columns():
    pairs = np.zeros((5, 5))
    pairs[3, 1], pairs[0, 4] = 7.0, -5.0
    fig = circuit_charts.qk_matrix(pairs, list("abcde"), list("vwxyz"), size=2)
    assert list(fig.data[0].y) == ["d", "a"] and list(fig.data[0].x) == ["w", "z"]


def test_no_edge_s_hover_marker_lies_on_a_node():
    """A head's edge into its own layer's MLP passes the heads between: a marker at its middle sat on
    a2.h3, and chromium gave a click there to the invisible edge marker, so the head did not open."""
    edges = [{"source": "a2.h2", "target": "m2", "input": None, "score": 0.4},
             {"source": "a2.h3", "target": "m3", "input": None, "score": 0.3},
             {"source": "a1.h0", "target": "a3.h2", "input": "k", "score": -0.2}]
    fig = circuit_charts.circuit_graph(edges, n_layers=4, n_heads=4)
    nodes = next(t for t in fig.data if t.name == "nodes")
    marks = next(t for t in fig.data if t.name == "edges")
    assert len(marks.x) == len(edges)
    for x, y in zip(marks.x, marks.y):
        assert all(abs(x - nx) > 0.25 or abs(y - ny) > 0.25 for nx, ny in zip(nodes.x, nodes.y)), (x, y)
