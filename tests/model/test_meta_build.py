"""Building a decoder to adopt loaded weights (``Decoder.from_state_dict``, on the meta device) must not
pay torch's init on the meta device: its ``normal_`` runs through torch's Python reference, whose first
call imports torch._dynamo (2–5 s at every app start). A decoder built for training keeps torch's init."""

from __future__ import annotations

import subprocess
import sys

import torch
from torch import nn

from tests.helpers.tiny import random_decoder, tiny_config
from txviz import Decoder

BUILD = """
import sys
from tests.helpers.tiny import random_decoder, tiny_config
from txviz import Decoder
config = tiny_config()
state = random_decoder(config).state_dict()
assert "torch._dynamo" not in sys.modules, "imported before the build"
Decoder.from_state_dict(config, state)
print("torch._dynamo" in sys.modules)
"""


def test_adopting_loaded_weights_does_not_import_torch_dynamo():
    done = subprocess.run([sys.executable, "-c", BUILD], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "False"


def test_the_embedding_keeps_torchs_own_init_outside_the_meta_device():
    config = tiny_config()
    torch.manual_seed(3)
    ours = Decoder(config).embed.weight
    torch.manual_seed(3)
    torch_own = nn.Embedding(config.vocab_size, config.d_model).weight
    assert torch.equal(ours, torch_own)


def test_the_adopted_model_holds_the_given_weights():
    config = tiny_config()
    source = random_decoder(config, seed=5)
    adopted = Decoder.from_state_dict(config, source.state_dict())
    assert adopted.embed.weight.device.type == "cpu"
    for name, tensor in source.state_dict().items():
        assert torch.equal(adopted.state_dict()[name], tensor), name
