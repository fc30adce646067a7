"""The "RoPE per layer kind" tab, on models whose local (sliding) layers rotate with their own base
(Gemma 3: 10 000 local, 1 000 000 global): which layers use which base, and both bases' wavelengths
read back from the tables the trace recorded (``rope_angles``, ``rope_local_angles``)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import streamlit as st

from app import cache
from app.app_pages.positions.view import PositionsView
from app.figures import charts
from txviz.analysis.positions import rope_kinds as rk

CAPTURE = ("rope_angles", "rope_local_angles")


def kinds_tab(view: PositionsView) -> None:
    config = view.config
    kinds = rk.rope_kinds(config)
    st.dataframe(pd.DataFrame([{"kind": k.name, "RoPE base θ": f"{k.theta:,.0f}",
                                "window": "whole context" if k.window is None else f"{k.window} tokens",
                                "layers": ", ".join(map(str, k.layers)), "count": len(k.layers)} for k in kinds]),
                 hide_index=True)
    recorded = cache.get_trace(view.source, view.prompt, view.bos, capture=CAPTURE, layers=(0,)).trace
    if recorded.n_tokens < 2:
        st.info("The prompt has one token: the recorded tables need two positions to read θ_i back.")
        return
    local = rk.inv_freq_from_angles(recorded["rope_local_angles"])
    full = rk.inv_freq_from_angles(recorded["rope_angles"])
    local_kind, global_kind = kinds[0], kinds[-1]
    window = local_kind.window
    waves = {f"local, θ {local_kind.theta:,.0f}": (2 * np.pi / local).numpy(),
             f"global, θ {global_kind.theta:,.0f}": (2 * np.pi / full).numpy(),
             f"window ({window})": np.full(len(local), window),
             f"context ({config.max_seq_len})": np.full(len(local), config.max_seq_len)}
    a, b = st.columns(2)
    a.plotly_chart(charts.lines(range(len(local)), waves, title="Wavelength 2π/θ_i of each pair, per layer kind",
                                x_title="pair i", y_title="tokens per turn", log_y=True), key="rope_kind_waves")
    turns = rk.angle_gap_at(local, full, window).numpy()
    b.plotly_chart(charts.lines(range(len(local)), {"local": turns[0], "global": turns[1]},
                                title=f"Angle turned over the window ({window} tokens), rad", x_title="pair i",
                                log_y=True), key="rope_kind_turns")
    st.markdown(
        f"Read back from the tables this trace recorded ({recorded.n_tokens} tokens). On the **local** layers "
        f"{rk.turning_pairs(local, window)} of {len(local)} pairs complete a turn inside the {window}-token window "
        f"they can see; on the **global** layers {rk.turning_pairs(full, window)} do, and "
        f"{len(full) - rk.turning_pairs(full, config.max_seq_len)} never complete one in the whole "
        f"{config.max_seq_len}-token context: the large base keeps slow pairs for far-apart tokens, "
        "while the local layers, which never see past the window, spend their pairs on distances inside it.")
