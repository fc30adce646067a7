"""Building a decoder to adopt loaded weights (``Decoder.from_state_dict``, on the meta device) must not
pay torch's init on the meta device: its ``normal_`` runs through torch's Python reference, whose first
call imports torch._dynamo (2–5 s at every app start). A decoder built for training keeps torch's init."""

from __future__ import annotations

import sys

import torch
from torch import nn

from tests.helpers.fresh_imports import in_a_fork
from tests.helpers.tiny import random_decoder, tiny_config
from txviz import Decoder

DYNAMO = "torch._dynamo"


class _DynamoWatch:
    """Records, and refuses, any import of torch._dynamo (a meta path finder: once the fork forgot the
    package, an import inside a function reaches it too), and every call into torch._dynamo's code or
    into torch._compile, the wrapper that imports it on a wrapped function's first call and then keeps
    it on that function (so in a process that already made that call, only the call shows)."""

    def __init__(self):
        self.imported, self.entered = [], set()

    def find_spec(self, name, path=None, target=None):
        if name == DYNAMO or name.startswith(DYNAMO + "."):
            self.imported.append(name)
            raise ImportError(f"{name} is watched")
        return None

    def on_event(self, frame, event, arg):
        filename = frame.f_code.co_filename.replace("\\", "/")
        if event == "call" and ("/torch/_dynamo/" in filename or filename.endswith("/torch/_compile.py")):
            self.entered.add(f"{filename.rsplit('/torch/', 1)[-1]}:{frame.f_code.co_name}")


def dynamo_touched_by_the_build() -> dict:
    """In a fork: forget torch._dynamo, then build a decoder to adopt weights while watching."""
    config = tiny_config()
    state = random_decoder(config).state_dict()
    for name in [n for n in sys.modules if n == DYNAMO or n.startswith(DYNAMO + ".")]:
        del sys.modules[name]
    vars(torch).pop("_dynamo", None)  # else torch._dynamo is an attribute, with no import to see
    watch = _DynamoWatch()
    sys.meta_path.insert(0, watch)
    sys.setprofile(watch.on_event)
    try:
        Decoder.from_state_dict(config, state)
    finally:
        sys.setprofile(None)
    return {"imported": watch.imported, "entered": sorted(watch.entered)}


def test_adopting_loaded_weights_does_not_import_torch_dynamo():
    """Asked in a fork of this process, whatever it imported or called before (a child interpreter
    proved it from nothing but paid torch's import again, ~2-3 CPU s)."""
    assert in_a_fork(dynamo_touched_by_the_build) == {"imported": [], "entered": []}


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
