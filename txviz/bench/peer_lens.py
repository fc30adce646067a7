"""TransformerLens' side of the peer benchmark: which of its two model classes runs, how it is built from the
Hugging Face folder, and the words the report prints for it.

* ``hooked``: ``HookedTransformer``, TransformerLens' own pure-torch model (up to TransformerLens 3.x; 4.0
  removed it). SmolLM2 is not one of its named models, so it is built from the folder exactly as
  ``HookedTransformer.from_pretrained`` builds a named one: the config converted from the folder's
  ``config.json``, the weights converted from the Hugging Face model, then the default processing
  (LayerNorm folded, writing weights and unembedding centred, value biases folded).
* ``bridge``: ``TransformerBridge.boot_transformers`` (TransformerLens 4.x), the Hugging Face modules with
  TransformerLens' hooks around them and its own eager attention inside, raw weights.

Both compute the same attention patterns as txviz (on SmolLM2 at 1024 tokens within 4e-6 for the
bridge, 4e-5 for HookedTransformer, whose folded weights sum in another order). On a CPU the bridge is
the faster and leaner of the two (SmolLM2, 1024 tokens, one thread, every map, medians of three
alternating runs: 8.3 against 9.6 CPU seconds, 2.3 against 2.5–2.7 GB), hence the default; neither can use a fused attention kernel, since a pattern must
exist to be cached. Nothing here reaches the network: the folder is local and the hub is set offline.
"""

from __future__ import annotations

import os

APIS = ("bridge", "hooked")
DEFAULT_API = "bridge"
SETTINGS = {
    "bridge": "TransformerBridge.boot_transformers (raw weights, no compatibility mode, eager attention), fp32",
    "hooked": "HookedTransformer built as from_pretrained builds it (fold_ln, centred writing weights and "
              "unembedding, folded value biases), fp32",
}
PROBES = {"bridge": "from transformer_lens.model_bridge import TransformerBridge",
          "hooked": "from transformer_lens import HookedTransformer"}


def offline() -> None:
    """The hub is never asked anything: every file comes from the local folder."""
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ["TRANSFORMERS_OFFLINE"] = "1"


def load(folder: str, api: str = DEFAULT_API):
    offline()
    import torch
    if api == "bridge":
        from transformer_lens.model_bridge import TransformerBridge
        return TransformerBridge.boot_transformers(folder, device="cpu", dtype=torch.float32)
    if api == "hooked":
        return hooked(folder, torch.float32)
    raise ValueError(f"unknown TransformerLens API {api!r}: one of {', '.join(APIS)}")


def hooked(folder: str, dtype):
    import tempfile
    import warnings
    from pathlib import Path

    from transformer_lens import HookedTransformer
    from transformer_lens import loading_from_pretrained as loading
    from transformers import AutoModelForCausalLM, AutoTokenizer

    hf_model = AutoModelForCausalLM.from_pretrained(folder, dtype=dtype)
    with tempfile.TemporaryDirectory() as plain:
        # TransformerLens 3.x picks some configs by a word in the name ("llama", "gemma") without reading
        # config.json, so a path holding such a word would get a named model's sizes: a neutral link
        neutral = Path(plain) / "model"
        neutral.symlink_to(Path(folder).resolve(), target_is_directory=True)
        config = loading.get_pretrained_model_config(str(neutral), fold_ln=True, device="cpu", dtype=dtype)
        state = loading.get_pretrained_state_dict(str(neutral), config, hf_model, dtype=dtype)
    del hf_model
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # 3.x announces the class's removal in 4.0
        model = HookedTransformer(config, AutoTokenizer.from_pretrained(folder), move_to_device=False)
    model.load_and_process_state_dict(state, fold_ln=True, center_writing_weights=True, center_unembed=True,
                                      fold_value_biases=True)
    return model.eval()


def pattern_hook(name: str) -> bool:
    return name.endswith("hook_pattern")


def run_with_cache(model, ids, workload: str):
    """The call a TransformerLens user makes: every pattern (``maps``) or every hook (``everything``)."""
    import torch
    with torch.inference_mode():
        return model.run_with_cache(ids, names_filter=pattern_hook if workload == "maps" else None)
