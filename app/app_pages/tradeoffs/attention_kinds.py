"""The "MHA / GQA / MQA" tab: how many key/value heads the cache keeps, what that saves per token on the
loaded model, and what quality the zoo's variants lost for it (with the evaluation noise drawn honestly)."""

from __future__ import annotations

import streamlit as st

from app import cache
from app.app_pages.tradeoffs.real_kinds import real_and_zoo
from app.app_pages.tradeoffs.view import TradeoffsView
from app.app_pages.tradeoffs.zoo_findings import loss_noise, zoo_table
from app.figures import tradeoff_charts
from app.ui.config_notes import config_warnings, layer_table
from app.ui.widgets import counted, limit_text, plain
from txviz.analysis.kv.memory_model import MemoryModel
from txviz.analysis.kv.report import UNKNOWN_CONTEXT
from txviz.analysis.tradeoffs import tables
from txviz.analysis.tradeoffs import noise, zoo_results


def attention_kinds(view: TradeoffsView) -> None:
    st.markdown("Every query head can keep its own keys and values (MHA), share them within a group (GQA) "
                "or all share one pair (MQA). The cache shrinks with the number of KV heads; the question is "
                "what quality it costs.")
    st.latex(r"\text{KV bytes/token} = 2\,L\,H_{kv}\,d_{head}\,b")
    try:
        st.dataframe(tables.attention_kind_rows(view.config, view.dtype_name), hide_index=True)
    except ValueError as error:
        st.info(plain(error))
    any_config()
    real_and_zoo()
    st.subheader("Measured in the zoo")
    rows = zoo_results.zoo_rows(zoo_results.ATTENTION_KINDS)
    zoo_table(rows, {"variant": "variant", "n_kv_heads": "KV heads", "kv_bytes_per_token": "KV bytes/token (fp32)",
                     "params": "params", "val_loss": "val loss", "val_loss_4x": "val loss at 4× context"})
    done = [r for r in rows if r["trained"]]
    if done:
        kv_noise(done)


def kv_noise(done: list[dict]) -> None:
    """The zoo's attention kinds with their evaluation noise: error bars, an honest axis, and the verdict in words."""
    estimates = loss_noise(done)
    st.plotly_chart(tradeoff_charts.labelled_points([r["kv_bytes_per_token"] for r in done], [e.mean for e in estimates],
                                           [r["variant"] for r in done], y_error=[2 * e.se for e in estimates],
                                           y_range=noise.loss_axis_range(estimates),
                                           title="KV cache vs validation loss (bars: ± 2 standard errors)",
                                           x_title="KV bytes per token (fp32)", y_title="val loss (nats)"),
                    key="to_kv_zoo")
    st.caption("Standard errors over the held-out windows the lab's evaluation scores (their mean is eval.json's "
               "val loss); the y-axis spans at least 5 % of the loss, so a 0.1 % difference looks like one.")


def any_config() -> None:
    """The same table for any causal LM's config.json (txviz.geometry reads it; no weights needed)."""
    max_config = cache.limits().max_config_bytes
    upload = st.file_uploader(f"…or for any model's config.json (at most {limit_text(max_config)})", type=["json"],
                              key="to_kinds_upload",
                              max_upload_size=max(1, -(-max_config // 2**20)),
                              help="Any Hugging Face causal LM: the memory calculator on the KV cache page "
                                   "takes the same files.")
    if upload is None:
        return
    try:
        model = MemoryModel.from_config_json(upload.getvalue(), upload.name, max_bytes=max_config)
    except ValueError as error:
        st.error(f"Could not read {plain(upload.name)}: {plain(error)}")  # names and values from the upload
        return
    config_warnings(model)
    st.caption(f"**{plain(model.name)}**: {plain(model.kind)}, {counted(model.n_heads, 'query head')} and "
               f"{counted(model.kv_heads, 'KV head')} of {model.head_dim} on {counted(model.n_layers, 'layer')}"
               + (f", of which {model.kv_layers} keep K and V." if model.kv_layers != model.n_layers else "."))
    try:
        st.dataframe(tables.attention_kind_rows(model, "bf16"), hide_index=True)
    except ValueError as error:  # MLA caches a latent: no per-head kinds to toggle
        st.info(f"{plain(error)}: it keeps {model.latent_dim + model.rope_dim} numbers per token and layer.")
    layer_table(model, model.max_context or UNKNOWN_CONTEXT)

