"""The peer benchmark's Hugging Face folder: the same weights txviz runs, in the form TransformerLens loads.

TransformerLens boots from a Hugging Face model folder (``TransformerBridge.boot_transformers``), while
txviz ships its models as .gguf files. transformers dequantizes a .gguf itself (``gguf_file=``) but
refuses to ``save_pretrained`` a model loaded that way, so the model is rebuilt from the same config
without its ``quantization_config``, given the dequantized tensors, and saved as float32 safetensors
with the tokenizer beside it. Built once and cached under the txviz home (``peer/<gguf stem>-hf``); a
half-written folder never stands as a finished one (it is written beside and renamed into place).
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from txviz.loading.home import txviz_home

DONE_MARKER = "txviz-peer-folder.json"  # written last: a folder without it is rebuilt


def peer_folder(gguf: Path, home: Path | None = None) -> Path:
    """The cached Hugging Face folder of ``gguf`` (built the first time; needs transformers)."""
    target = (home or txviz_home()) / "peer" / f"{gguf.stem}-hf"
    if (target / DONE_MARKER).is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent, prefix=".peer-") as scratch:
        built = Path(scratch) / "model"
        write_folder(gguf, built)
        if target.exists():
            shutil.rmtree(target)
        built.rename(target)
    return target


def write_folder(gguf: Path, directory: Path) -> None:
    import json

    import torch
    import transformers
    from transformers import AutoModelForCausalLM, AutoTokenizer

    transformers.logging.set_verbosity_error()
    loaded = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32)
    config = loaded.config
    if hasattr(config, "quantization_config"):
        del config.quantization_config  # what makes transformers refuse to save a GGUF-loaded model
    rebuilt = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    rebuilt.load_state_dict(loaded.state_dict())
    rebuilt.save_pretrained(directory, safe_serialization=True)
    AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name).save_pretrained(directory)
    (directory / DONE_MARKER).write_text(json.dumps({"gguf": gguf.name}))
