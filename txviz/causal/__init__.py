"""Which heads *cause* the answer: interventions on the model, per call.

* ``intervention``: ablation (zero, mean over positions, resample) and activation patching at any edit
  point (head outputs, q/k/v, FFN outputs, the residual stream), the variants carried by the batch;
* ``patching`` / ``residual``: every head, or every (layer, position), patched in batched calls;
* ``dla``: direct logit attribution with the final norm's scale frozen;
* ``attribution``: attribution patching, the gradient estimate of every head's patching effect;
* ``report``: all of it for one prompt pair, as ``txviz patch`` prints it.

References: Wang et al. 2022 (IOI); Meng et al. 2022 (causal tracing); Heimersheim & Nanda 2024 ("How to
use and interpret activation patching"); Nanda 2023 ("Attribution Patching").
"""

from txviz.causal.activations import ActivationRecorder, GradientProbe, run_with_activations
from txviz.causal.attribution import agreement, attribution_patching
from txviz.causal.dla import LogitAttribution, direct_logit_attribution
from txviz.causal.intervention import Intervention, Replace
from txviz.causal.metric import answer_tokens, logit_diff
from txviz.causal.patching import ablate_heads, patch_heads, run_variants
from txviz.causal.residual import residual_grid

__all__ = ["ActivationRecorder", "GradientProbe", "Intervention", "LogitAttribution", "Replace", "ablate_heads",
           "agreement", "answer_tokens", "attribution_patching", "direct_logit_attribution", "logit_diff",
           "patch_heads", "residual_grid", "run_variants", "run_with_activations"]
