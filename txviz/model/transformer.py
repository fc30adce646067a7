"""The decoder: embeddings → L pre-norm blocks → final norm → logits.

    h = x + Attention(Norm(x));   y = h + FFN(Norm(h))
    h = x + PostNorm(Attention(Norm(x)));   y = h + PostNorm(FFN(Norm(h)))   (``sandwich_norm``, Gemma 2/3)
    y = x + Attention(Norm₁(x)) + FFN(Norm₂(x))   (``parallel_block``, GPT-NeoX; Wang & Komatsuzaki 2021)
    y = x + Attention(Norm(x)) + FFN(Norm(x))   (``shared_block_norm``, Phi-1/2)
    h = x + PostNorm(Attention(x));   y = h + PostNorm(FFN(h))   (``pre_norm`` off, OLMo 2)
    h = x + m·Attention(Norm(x));   y = h + m·FFN(Norm(h))   (m = ``residual_scale``, Granite)

Embeddings are multiplied by ``embed_scale`` (Gemma: √d), normalized where ``embed_norm`` asks
(BLOOM's word_embeddings_layernorm), and the logits divided by ``logit_divisor`` (Granite) and
soft-capped where the config asks. A MoE model's FFN is picked per layer (``dense_layers`` stay dense). Layers come in kinds: full
attention, or sliding over a window with its own RoPE base
(``layer_types``, ``rope_local_theta``), with RoPE or without (``layer_rope``, SmolLM3); each call
builds one AttentionContext per kind (mask, window, RoPE tables) and each layer takes its kind's. A
trace records the global kind's RoPE tables; layer i's own are
``model.kind_positions[model.kind_of[i]].angles(positions)``.

Token ids in, logits out; the model never sees strings and keeps no state between calls. What a
caller wants to see is asked for per call through a recorder (txviz.model.recording names what the
model calls; txviz.capture.trace keeps it); a KV cache is passed in explicitly (txviz.model.kv_cache).
Without them a call gets the null recorder and the no-op cache, so ``forward`` is one straight line.
Its layers may sit on different devices, or be offloaded
(txviz.model.placement): every weight is used by calling the module that owns it, so a placement hook
sees it run, and position tables follow the hidden states.

Parameter names (the loaders' target):
  embed.weight · positions.weight (learned only) · embed_norm.{weight,bias} (embed_norm)
  final_norm.{weight,bias} · lm_head.weight (untied) · lm_head.bias (lm_head_bias)
  layers.{i}.attn_norm / ffn_norm .{weight,bias} (pre_norm; no ffn_norm with shared_block_norm)
  layers.{i}.post_attn_norm / post_ffn_norm (sandwich_norm)
  layers.{i}.attn.{q,k,v,o}_proj.{weight,bias}   (q rows: head-major, rotate-half RoPE pairing)
  layers.{i}.attn.{q,k}_norm.{weight,bias} (qk_norm: D wide, or H·D / Hkv·D across heads) · layers.{i}.attn.sinks (attn_sinks)
  layers.{i}.ffn.{gate,up,down}_proj (SwiGLU, GeGLU) · ffn.{up,down}_proj (GELU MLP)
  layers.{i}.ffn.router.{weight,bias} · ffn.experts.{e}.{gate,up,down}_proj (MoE)
  layers.{i}.ffn.shared_expert.{gate,up,down}_proj · ffn.shared_expert_gate.weight (shared expert)
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

from txviz.config import ModelConfig, RopeScaling
from txviz.model.attention import Attention, AttentionContext
from txviz.model.ffn import make_ffn
from txviz.model.kv_cache import NO_CACHE, NO_LAYER_CACHE, KVCache, LayerKVCache, NoCache, NoLayerCache
from txviz.model.norm import SharedNorm, make_norm, make_optional_norm
from txviz.model.positions import NoPositions, make_positions
from txviz.model.recording import NULL_LAYER_RECORDER, NULL_RECORDER, LayerRecorderProtocol, RecorderProtocol
from txviz.model.scale import make_divide, make_multiply, then
from txviz.model.sinks import SinkAttention
from txviz.model.softcap import make_softcap


class InputError(ValueError):
    """Token ids the model cannot run on (empty, out of vocabulary, longer than its context)."""


class Block(nn.Module):
    def __init__(self, config: ModelConfig, layer: int = 0):
        super().__init__()
        self.attn_norm = make_optional_norm(config, config.pre_norm)  # identity without pre-norms (OLMo 2)
        self.attn = (SinkAttention if config.attn_sinks else Attention)(config)
        self.post_attn_norm = make_optional_norm(config, config.sandwich_norm)  # identity without sandwich
        self.ffn_norm = make_optional_norm(config, config.pre_norm)
        self.ffn = make_ffn(config, layer)  # dense, or experts on a MoE layer
        self.post_ffn_norm = make_optional_norm(config, config.sandwich_norm)
        self.scale_residual = make_multiply(config.residual_scale)  # identity but for Granite

    def forward(self, x: torch.Tensor, ctx: AttentionContext, cache: LayerKVCache | NoLayerCache = NO_LAYER_CACHE,
                record: LayerRecorderProtocol = NULL_LAYER_RECORDER) -> torch.Tensor:
        x = record.edit("resid_pre", x)
        attn_out = self.scale_residual(self.post_attn_norm(self.attn(self.attn_norm(x), ctx, cache, record)))
        h = x + attn_out  # attn_out: what joins the residual
        ffn = self.post_ffn_norm(self.feed_forward(self.ffn_norm(h), record))
        ffn_out = record.edit("ffn_out", self.scale_residual(ffn))
        record.many(attn_out=attn_out, ffn_out=ffn_out)
        return record.edit("resid_post", h + ffn_out)

    def feed_forward(self, x: torch.Tensor, record: LayerRecorderProtocol) -> torch.Tensor:
        return self.ffn(x)  # a dense FFN has nothing to record


class MoEBlock(Block):
    """A block whose FFN is a Mixture of Experts: the one FFN with something to record (its routing)."""

    def feed_forward(self, x: torch.Tensor, record: LayerRecorderProtocol) -> torch.Tensor:
        return self.ffn(x, record)


class ParallelBlock(Block):
    """Attention and FFN both read the block's input, each through its own norm (GPT-NeoX with
    use_parallel_residual, GPT-J with one norm): y = x + Attn(attn_norm(x)) + FFN(ffn_norm(x))."""

    def forward(self, x: torch.Tensor, ctx: AttentionContext, cache: LayerKVCache | NoLayerCache = NO_LAYER_CACHE,
                record: LayerRecorderProtocol = NULL_LAYER_RECORDER) -> torch.Tensor:
        x = record.edit("resid_pre", x)
        attn_out = self.scale_residual(self.post_attn_norm(self.attn(self.attn_norm(x), ctx, cache, record)))
        ffn = self.post_ffn_norm(self.feed_forward(self.ffn_norm(x), record))
        ffn_out = record.edit("ffn_out", self.scale_residual(ffn))
        record.many(attn_out=attn_out, ffn_out=ffn_out)
        return record.edit("resid_post", ffn_out + attn_out + x)  # transformers' order of the sum


class SharedNormParallelBlock(ParallelBlock):
    """The parallel block with one norm read by both sublayers (Phi-1/2, GPT-J):
    y = x + Attn(norm(x)) + FFN(norm(x)). Its ``ffn_norm`` calls ``attn_norm`` again and holds no weights
    of its own, so whatever recomputes a block's FFN input (the block walkthrough, circuits) gets it right."""

    def __init__(self, config: ModelConfig, layer: int = 0):
        super().__init__(config, layer)
        self.ffn_norm = SharedNorm(self.attn_norm)


class ParallelMoEBlock(ParallelBlock, MoEBlock):
    """The parallel block with a Mixture-of-Experts FFN."""


class SharedNormParallelMoEBlock(SharedNormParallelBlock, MoEBlock):
    """The one-norm parallel block with a Mixture-of-Experts FFN."""


def make_block(config: ModelConfig, layer: int = 0) -> Block:
    if config.shared_block_norm:  # the config allows it only with parallel_block
        return (SharedNormParallelMoEBlock if config.is_moe_layer(layer) else SharedNormParallelBlock)(config, layer)
    kinds = {(False, False): Block, (False, True): MoEBlock, (True, False): ParallelBlock,
             (True, True): ParallelMoEBlock}
    return kinds[config.parallel_block, config.is_moe_layer(layer)](config, layer)


def _embedding(vocab_size: int, d_model: int) -> nn.Embedding:
    """nn.Embedding with torch's own N(0, 1) init, except on the meta device (``from_state_dict``): there
    ``normal_`` runs through torch's Python reference, whose first call imports torch._dynamo, 2–5 s once
    per process, for a tensor that the loaded weights replace at once."""
    weight = torch.empty(vocab_size, d_model)  # on the meta device inside ``with torch.device("meta")``
    if weight.device.type != "meta":
        nn.init.normal_(weight)  # what nn.Embedding.reset_parameters does: the same draws from the RNG
    return nn.Embedding(vocab_size, d_model, _weight=weight)


class Decoder(nn.Module):
    def __init__(self, config: ModelConfig):
        super().__init__()
        self.config = config
        self.embed = _embedding(config.vocab_size, config.d_model)
        self.positions = make_positions(config)
        self.embed_norm = make_optional_norm(config, config.embed_norm)  # identity without one
        self.layers = nn.ModuleList(make_block(config, i) for i in range(config.n_layers))
        self.final_norm = make_norm(config)
        self.lm_head = None if config.tie_embeddings else nn.Linear(config.d_model, config.vocab_size,
                                                                    bias=config.lm_head_bias)
        # logits / logit_divisor (Granite), then soft-capped (Gemma 2): the identity for most models
        self.cap_logits = then(make_divide(config.logit_divisor), make_softcap(config.final_softcap))
        # Layer kinds: each distinct (window, RoPE or not) (window None: full attention; no RoPE: SmolLM3's
        # NoPE layers), with the first layer of the kind, whose cache tells the kind's key positions; layer i
        # attends with context kind_of[i].
        layer_kinds = tuple(zip(config.layer_windows, map(config.layer_uses_rope, range(config.n_layers))))
        kinds = tuple(dict.fromkeys(layer_kinds))
        self.kind_windows = tuple(window for window, _ in kinds)
        self.kind_first_layer = tuple(layer_kinds.index(kind) for kind in kinds)
        self.kind_of = tuple(kinds.index(kind) for kind in layer_kinds)
        self.kind_positions = tuple(self._positions_for(*kind) for kind in kinds)  # a tuple: not submodules
        self.global_kind = self._global_kind(kinds)  # what a trace records

    @property
    def unembedding(self) -> torch.Tensor:
        """(V, d): the matrix that turns the final residual into logits (tied to the embedding or not)."""
        return self.embed.weight if self.lm_head is None else self.lm_head.weight

    @property
    def unembedding_bias(self) -> torch.Tensor | None:
        """(V,): the bias added to the logits (Phi-1/2's lm_head), or None."""
        return None if self.lm_head is None else self.lm_head.bias

    def check_ids(self, ids: torch.Tensor, start: int = 0) -> torch.Tensor:
        if not isinstance(ids, torch.Tensor):
            try:  # no dtype forced: 1.5 must be refused, not truncated to 1
                ids = torch.as_tensor(ids)
            except (TypeError, ValueError, RuntimeError) as error:  # ragged, strings, None, > int64
                raise InputError(f"token ids must be a (batch, tokens) array of integers: {error}") from None
        if ids.dim() == 1:
            ids = ids[None]
        if ids.dim() != 2:
            raise InputError(f"token ids must be (batch, tokens), got shape {tuple(ids.shape)}")
        if ids.numel() == 0:
            raise InputError("no tokens: the prompt is empty" if ids.shape[1] == 0 else "a batch of no sequences")
        if ids.dtype not in (torch.int32, torch.int64):
            raise InputError(f"token ids must be integers (int32 or int64), got {ids.dtype}")
        low, high = int(ids.min()), int(ids.max())
        if low < 0 or high >= self.config.vocab_size:
            raise InputError(f"token id out of range [0, {self.config.vocab_size}): found {low if low < 0 else high}")
        if start + ids.shape[1] > self.config.max_seq_len:
            raise InputError(f"{start + ids.shape[1]} tokens exceed the model's context of "
                             f"{self.config.max_seq_len}")
        return ids.long()

    def forward(self, ids: torch.Tensor, *, cache: KVCache | NoCache = NO_CACHE,
                record: RecorderProtocol = NULL_RECORDER, last_only: bool = False) -> torch.Tensor:
        """ids (B, T) → logits (B, T, V), or (B, 1, V) with ``last_only``."""
        # legend: B batch, T new tokens, S keys attended to (cached and new), d model width, V vocabulary
        start = cache.seq_len
        ids = self.check_ids(ids, start)
        if self.embed.weight.device.type != "meta":  # offloaded (txviz.model.placement): its hook moves ids
            ids = ids.to(self.embed.weight.device)
        q_pos = torch.arange(start, start + ids.shape[1], device=ids.device)  # (T,)
        x = self.embed(ids)  # (B, T, d)
        x = self.embed_norm(self.positions.add_to_embeddings(x * self._embed_scale(x.dtype), q_pos))  # (B, T, d)
        return self._layers_on(x, q_pos, 0, cache, record, last_only)

    def resume(self, residual: torch.Tensor, layer: int, *, cache: KVCache | NoCache = NO_CACHE,
               record: RecorderProtocol = NULL_RECORDER, last_only: bool = False) -> torch.Tensor:
        """The logits of a call that starts at ``layer`` from ``residual`` (B, T, d), the residual stream
        entering that layer at positions s..s+T−1, s = ``cache.seq_len`` (what an earlier call's
        ``record.residual(layer, …)`` saw; ``layer`` = n_layers: the final residual). The layers before
        it are not run: many interventions on later layers share what the earlier ones computed once,
        and with a cache of the first s positions' keys and values, what every variant leaves unchanged
        before position s (txviz.causal.patching)."""
        if not 0 <= layer <= len(self.layers):
            raise InputError(f"layer {layer} is outside 0..{len(self.layers)}")
        if residual.dim() != 3 or residual.shape[-1] != self.config.d_model or residual.shape[1] == 0:
            raise InputError(f"the residual must be (batch, tokens, {self.config.d_model}), "
                             f"got {tuple(residual.shape)}")
        start = cache.seq_len
        self.check_ids(torch.zeros(1, residual.shape[1], dtype=torch.long), start)  # the context length
        q_pos = torch.arange(start, start + residual.shape[1], device=residual.device)
        return self._layers_on(residual, q_pos, layer, cache, record, last_only)

    def _layers_on(self, x: torch.Tensor, q_pos: torch.Tensor, first: int, cache: KVCache | NoCache,
                   record: RecorderProtocol, last_only: bool) -> torch.Tensor:
        """Layers ``first``.. on the residual x (B, T, d) of positions q_pos, then the final norm and logits."""
        contexts = [self.layer_context(kind_first, q_pos, cache.key_positions(q_pos, kind_first), x.dtype)
                    for kind_first in self.kind_first_layer]  # one per kind of layer
        record.globals(contexts[self.global_kind], self.kind_positions[self.global_kind])
        record.residual(first, x)
        for i in range(first, len(self.layers)):
            x = self.layers[i](x, contexts[self.kind_of[i]], cache.layer(i), record.layer(i))  # (B, T, d)
            record.residual(i + 1, x)
        cache.advance(len(q_pos))
        if last_only:
            x = x[:, -1:]
        x = self.final_norm(x)
        if self.lm_head is not None:  # called, not read: a placement hook must see the head run
            return self.cap_logits(self.lm_head(x))
        return self.cap_logits(F.linear(x.to(self.embed.weight.device), self.embed.weight))

    def layer_context(self, layer: int, q_pos: torch.Tensor, k_pos: torch.Tensor,
                      dtype: torch.dtype) -> AttentionContext:
        """The AttentionContext ``layer`` attends with (its window, its RoPE base) for these positions."""
        kind = self.kind_of[layer]
        return AttentionContext(self.kind_positions[kind], q_pos, k_pos, self.kind_windows[kind], dtype)

    def _positions_for(self, window: int | None, rope: bool = True) -> nn.Module:
        """The positions module of a kind: layers RoPE skips get none (SmolLM3's NoPE layers); sliding
        layers with their own RoPE base get their own parameter-free RoPE, unscaled (as in Gemma 3); every
        other layer shares ``positions``."""
        c = self.config
        if c.positions == "rope" and not rope:
            return NoPositions()
        if window is None or c.positions != "rope" or c.rope_local_theta is None:
            return self.positions
        return make_positions(c.replace(rope_theta=c.rope_local_theta, rope_scaling=RopeScaling()))

    @staticmethod
    def _global_kind(kinds: tuple[tuple[int | None, bool], ...]) -> int:
        """The kind whose positions a trace records: full attention with RoPE where there is one."""
        for wanted in ((None, True), (None, False)):
            if wanted in kinds:
                return kinds.index(wanted)
        return 0

    def _embed_scale(self, dtype: torch.dtype) -> float:
        """``embed_scale`` rounded to the activations' dtype first, as the references multiply by a
        tensor of that dtype (√640 in bf16 is 25.25, not 25.298…)."""
        return float(torch.tensor(self.config.embed_scale).to(dtype))  # float32 first, as the buffer is

    @classmethod
    def from_state_dict(cls, config: ModelConfig, state_dict: dict[str, torch.Tensor], *,
                        device: torch.device | str = "cpu", dtype: torch.dtype = torch.float32) -> "Decoder":
        """Build on the meta device and adopt the tensors (no second copy of the weights)."""
        with torch.device("meta"):
            model = cls(config)
        expected = set(model.state_dict())
        missing, unexpected = expected - set(state_dict), set(state_dict) - expected
        if missing or unexpected:
            raise ValueError(f"weights do not match the config: missing {sorted(missing)[:5]}, "
                             f"unexpected {sorted(unexpected)[:5]}")
        for name, param in model.state_dict().items():
            tensor = state_dict[name]
            if tuple(tensor.shape) != tuple(param.shape):
                raise ValueError(f"{name}: shape {tuple(tensor.shape)} does not match the config's "
                                 f"{tuple(param.shape)}")
        converted = {k: v.to(device=device, dtype=dtype) for k, v in state_dict.items()}
        model.load_state_dict(converted, assign=True)
        return model.eval()
