"""txviz: see inside a real decoder-only transformer.

The names below are imported on first use (PEP 562), so ``import txviz.limits`` or ``txviz.loading.fetch``
(the CLI's fetch, the isolated workers' parents) does not import torch for them."""

from importlib import import_module

_HOMES = {
    "ConfigError": "txviz.config", "ModelConfig": "txviz.config", "RopeScaling": "txviz.config",
    "Decoder": "txviz.model", "InputError": "txviz.model", "KVCache": "txviz.model",
    "kv_bytes_per_token": "txviz.model", "kv_cache_bytes": "txviz.model",
    "CAPTURES": "txviz.capture.trace", "CaptureError": "txviz.capture.trace", "Trace": "txviz.capture.trace",
    "trace": "txviz.capture.trace",
}
__all__ = sorted(_HOMES)
__version__ = "0.1.0"


def __getattr__(name: str):
    if name not in _HOMES:
        raise AttributeError(f"module 'txviz' has no attribute {name!r}")
    value = getattr(import_module(_HOMES[name]), name)
    globals()[name] = value  # once: later lookups skip this function
    return value


def __dir__():
    return sorted([*globals(), *_HOMES])
