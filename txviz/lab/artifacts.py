"""What a lab run leaves on disk, in the directory ``txviz.loading.zoo`` loads:

    config.json        ModelConfig.to_dict() plus the "txviz_format" marker
    model.safetensors  the weights in float16 (safetensors only: nothing is ever pickled)
    tokenizer.json     the word-level tokenizer (txviz.lab.tokenizer)
    curves.json        loss and load-balancing loss per step, learning rate, tokens/s, wall time,
                       seed, training and corpus settings
    eval.json          validation losses (at 1×, 2×, 4× the training context), expert load, probes,
                       and the loss of each validation window (the evaluation noise)

Weights are stored in float16 to keep the whole zoo a few MB; the evaluation is run on the weights
*after* that rounding (``as_shipped``), so eval.json describes exactly the model that loads.
"""

from __future__ import annotations

import json
from pathlib import Path

import tokenizers
import torch
from safetensors.torch import save_file

from txviz.loading.zoo import (CONFIG_FILE, CURVES_FILE, EVAL_FILE, TOKENIZER_FILE, WEIGHTS_FILE,
                               config_json)
from txviz.model import Decoder

SAVE_DTYPE = torch.float16


def shipped_weights(model: Decoder) -> dict[str, torch.Tensor]:
    return {name: tensor.detach().to(SAVE_DTYPE).contiguous() for name, tensor in model.state_dict().items()}


def as_shipped(model: Decoder) -> Decoder:
    """The model with its weights rounded to the saved dtype and back to float32."""
    weights = {name: tensor.float() for name, tensor in shipped_weights(model).items()}
    return Decoder.from_state_dict(model.config, weights)


def save_run(directory: Path, model: Decoder, tokenizer: tokenizers.Tokenizer, curves: dict,
             evaluation: dict) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / CONFIG_FILE).write_text(config_json(model.config) + "\n", encoding="utf-8")
    save_file(shipped_weights(model), str(directory / WEIGHTS_FILE),
              metadata={"format": "pt", "txviz_variant": model.config.name})
    (directory / WEIGHTS_FILE).chmod(0o644)  # safetensors writes 0600; the zoo is meant to be read
    tokenizer.save(str(directory / TOKENIZER_FILE))
    (directory / CURVES_FILE).write_text(json.dumps(curves) + "\n", encoding="utf-8")
    (directory / EVAL_FILE).write_text(json.dumps(evaluation, indent=2) + "\n", encoding="utf-8")
