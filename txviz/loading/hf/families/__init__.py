"""One module per model family added after the first twelve: its config.json reader. The modules do not
import txviz.loading.hf.config (it imports them, to register them): the helpers they build on (reading
and checking fields, the Llama fields, RoPE) are handed to each reader as ``hf``."""
