"""Capture: what one forward call lets a caller see, asked for by name and returned frozen.

The model stays stateless; a recorder lives for one call, the layers offer it tensors, and it keeps
only what was asked for (txviz.model.recording names the interface the model calls).

    trace.py      named captures -> an immutable Trace on the CPU (the Recorder the model is handed)
    summaries.py  per-head metrics per query row, computed block by block during the pass
    maps.py       how stored maps are kept (fp16, lower triangle), and any map rebuilt from q and k
    cost.py       what a capture request would store and cost, and the request that fits a budget
    pooling.py    a long map pooled to a few hundred cells a side (block maxima of visible weights)
"""

from txviz.capture.cost import CaptureCost, CapturePlan, capture_cost, choose_capture
from txviz.capture.maps import AttentionRecipe, MapStorage, rebuild_attention
from txviz.capture.summaries import METRICS
from txviz.capture.trace import CAPTURES, SUMMARY_CAPTURE, CaptureError, Recorder, Trace, trace

__all__ = ["CAPTURES", "METRICS", "SUMMARY_CAPTURE", "AttentionRecipe", "CaptureCost", "CaptureError", "CapturePlan",
           "MapStorage", "Recorder", "Trace", "capture_cost", "choose_capture", "rebuild_attention", "trace"]
