"""What the Attention page's components send back, crafted as anyone can send it from a browser: a layer
of 'x', null, 1e308, 9999, a NaN, a bool, a list instead of a cell. The handlers (the Python side that
reads a component's value) ignore every such message, never raise in the session, and pass a real
choice on as ints inside the model."""

from __future__ import annotations

import math

import pytest

from app.components import head_grid, head_maps
from app.components.messages import cell_of, index_of

N_LAYERS, N_HEADS = 30, 9
BAD_NUMBERS = ["x", None, 1e308, -1e308, 9999, -1, 2.5, math.nan, math.inf, True, "3", [3], {"n": 3}]
BAD_CELLS = ([{"layer": bad, "head": 0} for bad in BAD_NUMBERS] + [{"layer": 0, "head": bad} for bad in BAD_NUMBERS]
             + [None, "x", 3, [0, 0], {}, {"layer": 0}])


class Handler:
    """A component mounted with its mount function replaced: the callbacks it registers, run against a
    session state of our own."""

    def __init__(self, monkeypatch, module):
        self.state, self.callbacks, self.calls = {}, {}, []
        monkeypatch.setattr(module.st, "session_state", self.state)
        monkeypatch.setattr(module, "_mount", lambda **kwargs: self.callbacks.update(kwargs))

    def send(self, key: str, name: str, value, callback: str) -> list:
        self.state[key] = {name: value}
        self.callbacks[callback]()
        return self.calls


@pytest.mark.parametrize("value", BAD_NUMBERS)
def test_index_of_refuses_what_is_not_an_index(value):
    assert index_of(value, N_LAYERS) is None


def test_index_of_reads_whole_numbers_as_json_sends_them():
    assert (index_of(3, N_LAYERS), index_of(3.0, N_LAYERS), index_of(0, 1), index_of(29, N_LAYERS)) == (3, 3, 0, 29)
    assert isinstance(index_of(3.0, N_LAYERS), int) and index_of(30, N_LAYERS) is None


@pytest.mark.parametrize("value", BAD_CELLS)
def test_a_crafted_pick_on_the_map_is_ignored(monkeypatch, value):
    handler = Handler(monkeypatch, head_maps)
    head_maps.head_maps_view({"n_layers": N_LAYERS, "n_heads": N_HEADS}, key="heatmap",
                             on_pick=lambda *cell: handler.calls.append(cell))
    assert handler.send("heatmap", "pick", value, "on_pick_change") == []


@pytest.mark.parametrize("value", BAD_CELLS)
def test_a_crafted_pick_on_the_grid_is_ignored(monkeypatch, value):
    handler = Handler(monkeypatch, head_grid)
    head_grid.head_grid({"layers": list(range(N_LAYERS)), "n_heads": N_HEADS}, key="head_grid",
                        on_pick=lambda *cell: handler.calls.append(cell))
    assert handler.send("head_grid", "pick", value, "on_pick_change") == []


@pytest.mark.parametrize("value", BAD_NUMBERS + [30])
def test_a_crafted_request_for_a_layer_is_ignored(monkeypatch, value):
    handler = Handler(monkeypatch, head_maps)
    head_maps.head_maps_blob(b"", key="heatmap", n_layers=N_LAYERS, on_layer=handler.calls.append)
    assert handler.send("heatmap_maps", "layer", value, "on_layer_change") == []


def test_a_component_state_that_is_not_a_mapping_is_ignored(monkeypatch):
    handler = Handler(monkeypatch, head_maps)
    head_maps.head_maps_view({"n_layers": N_LAYERS, "n_heads": N_HEADS}, key="heatmap",
                             on_pick=lambda *cell: handler.calls.append(cell))
    for state in (None, "x", 3, ["pick"]):
        handler.state["heatmap"] = state
        handler.callbacks["on_pick_change"]()
    assert handler.calls == []


def test_real_choices_pass_as_ints_inside_the_model(monkeypatch):
    handler = Handler(monkeypatch, head_maps)
    head_maps.head_maps_view({"n_layers": N_LAYERS, "n_heads": N_HEADS}, key="heatmap",
                             on_pick=lambda *cell: handler.calls.append(cell))
    handler.send("heatmap", "pick", {"layer": 29, "head": 8.0}, "on_pick_change")
    head_maps.head_maps_blob(b"", key="heatmap", n_layers=N_LAYERS, on_layer=handler.calls.append)
    handler.send("heatmap_maps", "layer", 4, "on_layer_change")
    assert handler.calls == [(29, 8), 4] and all(type(v) is int for v in (*handler.calls[0], handler.calls[1]))


def test_the_grid_passes_only_the_layers_it_draws(monkeypatch):
    """A grid of some layers (a budget that keeps the leading ones): a pick of another layer is ignored."""
    handler = Handler(monkeypatch, head_grid)
    head_grid.head_grid({"layers": [0, 1, 2], "n_heads": N_HEADS}, key="head_grid",
                        on_pick=lambda *cell: handler.calls.append(cell))
    handler.send("head_grid", "pick", {"layer": 5, "head": 0}, "on_pick_change")
    handler.send("head_grid", "pick", {"layer": 2, "head": 8}, "on_pick_change")
    assert handler.calls == [(2, 8)] and cell_of({"layer": 2, "head": 9}, 3, N_HEADS) is None
