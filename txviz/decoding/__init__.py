"""Decoding, step by step: generation with the KV cache that records what each step chose between,
what it chose, what it cost and (where asked) where in the stack the choice was made, and branches
that continue from any step reusing the cache.

    request.py       StepRecordRequest: what each step records (candidates, lens, attention rows)
    sampler_view.py  one step's distribution as it passes the sampler: raw, tempered, cut and renormalised
    step.py          the record of one step (DecodingStep) and of one candidate token
    lens.py          the logit lens of the chosen token: its rank after every layer, where it became top-1
    recorder.py      the recorder a step's forward call is handed (attention rows, residuals, keys/values)
    history.py       keys and values kept so a prefix's cache can be rebuilt (sliding layers overwrite theirs)
    run.py           decode(): the loop, and the Decoding it returns
    export.py        a run as JSON-ready dicts, one per step
    branch.py        branch(): another candidate at step t, continued on the cache of the tokens before it
"""

from txviz.decoding.branch import branch
from txviz.decoding.lens import LensReading, lens_logits, lens_reading
from txviz.decoding.request import PLAIN, StepRecordRequest
from txviz.decoding.run import Decoding, decode
from txviz.decoding.sampler_view import SamplerView
from txviz.decoding.step import Candidate, DecodingStep

__all__ = ["PLAIN", "Candidate", "Decoding", "DecodingStep", "LensReading", "SamplerView", "StepRecordRequest",
           "branch", "decode", "lens_logits", "lens_reading"]
