"""txviz: see inside a real decoder-only transformer."""

from txviz.config import ConfigError, ModelConfig, RopeScaling
from txviz.model import Decoder, InputError, KVCache, kv_bytes_per_token, kv_cache_bytes
from txviz.capture.trace import CAPTURES, CaptureError, Trace, trace

__all__ = ["CAPTURES", "CaptureError", "ConfigError", "Decoder", "InputError", "KVCache", "ModelConfig",
           "RopeScaling", "Trace", "kv_bytes_per_token", "kv_cache_bytes", "trace"]
__version__ = "0.1.0"
