"""The new token's attention at the chosen step as the browser's step viewer gets it: every head's row
of every layer (the last row of the causal map, one longer each step) when they fit the viewer's byte
budget, else the page's layer alone. The layer and head are the app's shared ones (kept in the URL);
the viewer changes them in the browser and sends them back here."""

from __future__ import annotations

from app.components.decoding_steps import payload
from app.services import decoding
from app.ui import state


def layer_and_head(view) -> tuple[int, int]:
    config = view.config
    state.clamp_head(config.n_layers, config.n_heads)
    return int(state.get("layer")), int(state.get("head"))


def run_key(view) -> str:
    """What the browser files this run's records under: its inputs, tokens and times (a run generated
    again from the same inputs is another run, with its own times)."""
    return payload.run_id(view.inputs, view.run.new_ids, tuple(step.seconds for step in view.run.steps))


def blob(view, layer: int) -> tuple[bytes, list[int]]:
    """The run's records for the viewer (every layer's rows, or ``layer``'s past the budget), built once
    per run and layers and kept for the session."""
    config = view.config
    layers = payload.layers_to_send(view.run, config.n_layers, config.n_heads, layer)
    key = (run_key(view), tuple(layers))
    kept = state.get("_decoding_steps_blob", None)
    if kept is not None and kept[0] == key:
        return kept[1], layers
    built = records(view, layers)
    state.put("_decoding_steps_blob", (key, built))
    return built, layers


def records(view, layers: list[int]) -> bytes:
    """The run's records with ``layers``' rows, as the viewer decodes them (payload.steps_blob)."""
    config, element = view.config, view.loaded.dtype.itemsize
    return payload.steps_blob(
        view.run, run_key=run_key(view), texts=view.texts, windows=list(config.layer_windows), n_heads=config.n_heads,
        layers=layers, vocab_size=config.vocab_size, element_bytes=element,
        formulas=[decoding.kv_formula_per_layer(config, step.position, element) for step in view.run.steps])
