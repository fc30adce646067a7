"""Loading models: files -> LoadedModel. ``load(source)`` takes the default model, a known model's name, a
GGUF file, a Hugging Face checkpoint directory, one of the lab's own directories or a Hub id.

The package is in three wings — ``gguf/``, ``hf/`` and ``tokenizer/`` — beside the fetch of known models
(``sources``, ``fetch``, ``known``), the Hub's downloads (``hub``, ``hub_id``, ``hub_policy``,
``hub_errors``), the isolated workers for untrusted parts (``isolated``, ``preflight``,
``workers/``) and the device a model runs on (``device``). This face only names the few entries a caller
needs; they are imported on first use (PEP 562), so importing one module of the package does not import
torch for it, and no module below imports from here.
"""

from importlib import import_module

_HOMES = {
    "load": "txviz.loading.loader", "DEFAULT_MODEL": "txviz.loading.loader",
    "LoadedModel": "txviz.loading.loaded",
    "default_device": "txviz.loading.device", "resolve_device": "txviz.loading.device",
}
__all__ = sorted(_HOMES)


def __getattr__(name: str):
    if name not in _HOMES:
        raise AttributeError(f"module 'txviz.loading' has no attribute {name!r}")
    value = getattr(import_module(_HOMES[name]), name)
    globals()[name] = value  # once: later lookups skip this function
    return value


def __dir__():
    return sorted([*globals(), *_HOMES])
