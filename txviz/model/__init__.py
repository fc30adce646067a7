"""The stateless decoder and its parts; see transformer.py for the parameter names."""

from txviz.model.kv_cache import KVCache, kv_bytes_per_token, kv_cache_bytes
from txviz.model.transformer import Block, Decoder, InputError

__all__ = ["Block", "Decoder", "InputError", "KVCache", "kv_bytes_per_token", "kv_cache_bytes"]
