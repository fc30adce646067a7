"""A two-layer model with hand-set weights whose circuit is known: a previous-token head (layer 0, head
0) writes each token's predecessor into a subspace of its own, and an induction head (layer 1, head 0)
matches its query (the current token) against that subspace in the keys (K-composition, Elhage et al.
2021; Olsson et al. 2022), copies the token after the match into an output subspace, and the unembedding
reads only that subspace. The other heads and the MLPs have small random weights: noise the circuit
must be found through.

Residual stream (d = 40): token one-hot 0–7, position one-hot 8–23, previous token 24–31, output 32–39.
"""

from __future__ import annotations

import torch

from tests.helpers.tiny import tiny_config
from txviz import Decoder

N_TOKENS, N_POSITIONS = 8, 16
TOK, POS, PREV, OUT = 0, 8, 24, 32
HEAD_DIM = 16

# The answer after "0 1 2 3 4 5 6 0 1 2 3 4 5" is 6; swapping 4 and 5 in the first half makes it 4.
CLEAN = [0, 1, 2, 3, 4, 5, 6, 0, 1, 2, 3, 4, 5]
CORRUPT = [0, 1, 2, 3, 5, 4, 6, 0, 1, 2, 3, 4, 5]
ANSWER, WRONG = 6, 4
K_COMPOSITION = ("a0.h0", "a1.h0", "k")
CIRCUIT = (("embed", "a0.h0", "v"), K_COMPOSITION, ("embed", "a1.h0", "v"), ("a1.h0", "logits", None))


def induction_model(noise: float = 0.05, seed: int = 0) -> Decoder:
    config = tiny_config(vocab_size=N_TOKENS, d_model=40, n_layers=2, n_heads=4, head_dim=HEAD_DIM,
                         ffn_hidden=16, max_seq_len=N_POSITIONS, positions="learned", ffn="gelu_mlp")
    torch.manual_seed(seed)
    model = Decoder(config)
    with torch.no_grad():
        for name, param in model.named_parameters():
            param.copy_(torch.ones_like(param) if name.endswith("norm.weight") else noise * torch.randn_like(param))
        model.embed.weight.zero_()
        model.embed.weight[:, TOK:TOK + N_TOKENS] = torch.eye(N_TOKENS)
        model.positions.weight.zero_()
        model.positions.weight[:, POS:POS + N_POSITIONS] = torch.eye(N_POSITIONS)
        model.lm_head.weight.zero_()
        model.lm_head.weight[:, OUT:OUT + N_TOKENS] = 5 * torch.eye(N_TOKENS)
        _head(model.layers[0].attn, q_from=POS, k_from=POS, k_shift=1, v_from=TOK, write_to=PREV, gain=1.5,
              width=N_POSITIONS, norm=20 ** 0.5)
        _head(model.layers[1].attn, q_from=TOK, k_from=PREV, k_shift=0, v_from=TOK, write_to=OUT, gain=2.0,
              width=N_TOKENS, norm=(40 / 3) ** 0.5)
    return model.eval()


def _head(attn, *, q_from: int, k_from: int, k_shift: int, v_from: int, write_to: int, gain: float,
          width: int, norm: float) -> None:
    """Head 0 of ``attn``: query dim e reads residual dim q_from + e, key dim e + k_shift reads k_from + e
    (so q_i·k_j is large when key j's feature is query i's shifted back by k_shift), value dim e reads
    v_from + e, and the output writes value dim e, unit size after the norm's gain ``norm``, to write_to + e."""
    rows = slice(0, HEAD_DIM)
    for weight in (attn.q_proj.weight, attn.k_proj.weight, attn.v_proj.weight):
        weight[rows] = 0
    attn.o_proj.weight[:, rows] = 0
    for e in range(width):
        attn.q_proj.weight[e, q_from + e] = gain
        if e + k_shift < HEAD_DIM:
            attn.k_proj.weight[e + k_shift, k_from + e] = gain
    for e in range(N_TOKENS):
        attn.v_proj.weight[e, v_from + e] = 1.0
        attn.o_proj.weight[write_to + e, e] = 1 / norm
