"""Every family txviz.geometry reads, against transformers itself: a tiny config built by the family's own
config class (``AutoConfig.for_model``, offline), written out as ``to_dict()`` writes it (every default, in
transformers 5's spellings), is read with no key left unread; its parameters equal those of the model
transformers builds from it (on the meta device: shapes, no weights); its layer types equal the config
class's ``layer_types`` wherever it derives one (windows switched on where a switch exists), read from the list
and, as a config written before transformers 5 has it, without."""

from __future__ import annotations

import pytest

from txviz.geometry import KNOWN_TYPES, read_geometry

transformers = pytest.importorskip("transformers")
torch = pytest.importorskip("torch")

BASE = dict(hidden_size=64, intermediate_size=96, num_hidden_layers=8, num_attention_heads=4, num_key_value_heads=2,
            vocab_size=300, max_position_embeddings=512, pad_token_id=0, bos_token_id=1, eos_token_id=2)
GPT_LIKE = dict(hidden_size=64, num_hidden_layers=8, num_attention_heads=4, vocab_size=300,
                max_position_embeddings=512, pad_token_id=0, bos_token_id=1, eos_token_id=2)
MLA = dict(kv_lora_rank=32, q_lora_rank=48, qk_rope_head_dim=8, qk_nope_head_dim=16, v_head_dim=16, n_routed_experts=8,
           n_shared_experts=1, num_experts_per_tok=2, moe_intermediate_size=24, first_k_dense_replace=1)
WINDOW = dict(sliding_window=16)
# (family, its config class's arguments): small dims, the family's own features switched on
CASES = {
    "llama": BASE, "mistral": {**BASE, **WINDOW}, "mixtral": {**BASE, "num_local_experts": 4, "num_experts_per_tok": 2},
    "qwen2": {**BASE, **WINDOW, "use_sliding_window": True, "max_window_layers": 3},
    "qwen2_moe": {**BASE, **WINDOW, "use_sliding_window": True, "max_window_layers": 5, "num_experts": 8,
                  "num_experts_per_tok": 2, "moe_intermediate_size": 24, "shared_expert_intermediate_size": 40},
    "qwen3": {**BASE, "head_dim": 32}, "qwen3_moe": {**BASE, **WINDOW, "use_sliding_window": True, "head_dim": 32,
                                                    "num_experts": 8, "num_experts_per_tok": 2, "moe_intermediate_size": 24},
    "gemma": {**BASE, "head_dim": 32}, "gemma2": {**BASE, **WINDOW, "head_dim": 32},
    "gemma3_text": {**BASE, **WINDOW, "head_dim": 32}, "phi": BASE, "phi3": {**BASE, **WINDOW},
    "falcon": GPT_LIKE, "gpt2": {**GPT_LIKE, "n_positions": 512}, "gpt_neox": {**GPT_LIKE, "intermediate_size": 96},
    "gptj": {**GPT_LIKE, "n_positions": 512, "rotary_dim": 8}, "bloom": GPT_LIKE,
    "mpt": dict(d_model=64, n_heads=4, n_layers=8, max_seq_len=512, vocab_size=300), "olmo": BASE, "olmo2": BASE,
    "starcoder2": {**BASE, **WINDOW}, "cohere": BASE, "cohere2": {**BASE, **WINDOW},
    "smollm3": {**BASE, **WINDOW, "use_sliding_window": True},
    "llama4_text": {**BASE, "intermediate_size_mlp": 128, "head_dim": 16, "num_local_experts": 4,
                    "num_experts_per_tok": 1, "interleave_moe_layer_step": 2, "attention_chunk_size": 32},
    "gpt_oss": {**BASE, **WINDOW, "head_dim": 16, "num_local_experts": 4, "num_experts_per_tok": 2,
                "max_position_embeddings": 131072},  # its default yarn scaling assumes this context
    "olmoe": {**BASE, "num_experts": 4, "num_experts_per_tok": 2},
    "granitemoe": {**BASE, "num_local_experts": 4, "num_experts_per_tok": 2, "embedding_multiplier": 3.0},
    "deepseek_v2": {**BASE, **MLA}, "deepseek_v3": {**BASE, **MLA, "n_group": 1, "topk_group": 1},
    "jamba": {**BASE, "num_experts": 4, "num_experts_per_tok": 2, "attn_layer_period": 4, "attn_layer_offset": 1,
              "mamba_d_state": 8, "mamba_dt_rank": 6},
    "qwen3_next": {**BASE, "head_dim": 32, "num_experts": 8, "num_experts_per_tok": 2, "moe_intermediate_size": 24,
                   "shared_expert_intermediate_size": 40, "linear_num_key_heads": 2, "linear_num_value_heads": 4,
                   "linear_key_head_dim": 16, "linear_value_head_dim": 12, "mlp_only_layers": [2]},
    "granitemoehybrid": {**BASE, "shared_intermediate_size": 40, "num_local_experts": 4, "num_experts_per_tok": 2,
                         "layer_types": ["mamba", "mamba", "mamba", "attention"] * 2, "mamba_n_heads": 8,
                         "mamba_d_head": 16, "mamba_n_groups": 2, "mamba_d_state": 8, "mamba_d_conv": 3},
}
GIVEN_LISTS = {"granitemoehybrid"}  # its layer_types is the config's own, derived from nothing else
SAME_NAMES = {"mamba": "linear_attention"}
# the cases whose layers differ: windows on some, chunks, linear attention or Mamba beside attention
MIXED = {"qwen2", "qwen2_moe", "gemma2", "gemma3_text", "cohere2", "smollm3", "llama4_text", "gpt_oss", "jamba",
         "qwen3_next", "granitemoehybrid"}  # Jamba's config class calls its Mamba layers linear attention


def built(family: str):
    config = transformers.AutoConfig.for_model(family, **CASES[family])
    with torch.device("meta"):
        model = transformers.AutoModelForCausalLM.from_config(config)
    return config, sum(p.numel() for p in model.parameters())


def test_every_family_has_a_case():
    assert set(KNOWN_TYPES) <= set(CASES)


@pytest.mark.parametrize("family", sorted(CASES))
def test_parameters_and_layer_types_equal_transformers_own(family):
    config, n_params = built(family)
    geometry = read_geometry(config.to_dict())
    assert geometry.n_params == n_params
    assert geometry.ignored == ()
    derived = getattr(config, "layer_types", None)
    if derived is not None and family not in ("mistral", "qwen3_moe"):  # classes that keep no layer_types
        assert [SAME_NAMES.get(t, t) for t in geometry.layer_types] == list(derived)
        if family in GIVEN_LISTS:
            return
        # a config written before transformers 5 has no list: the family's rule must derive the same one
        without_list = read_geometry({k: v for k, v in config.to_dict().items() if k != "layer_types"})
        assert without_list.layer_types == geometry.layer_types and without_list.windows == geometry.windows
    assert (len(set(geometry.layer_types)) > 1) == (family in MIXED)


def test_a_dense_granite_hybrid_and_one_with_rope():
    dense = {**CASES["granitemoehybrid"], "num_local_experts": 0, "position_embedding_type": "rope"}
    config = transformers.AutoConfig.for_model("granitemoehybrid", **dense)
    with torch.device("meta"):
        n_params = sum(p.numel() for p in transformers.AutoModelForCausalLM.from_config(config).parameters())
    geometry = read_geometry(config.to_dict())
    assert geometry.n_params == n_params and geometry.n_experts == 0 and geometry.positionless == ()
    assert read_geometry(built("granitemoehybrid")[0].to_dict()).positionless == (3, 7)  # no RoPE by default


# The families whose transformers model runs here with a cache of its own layers (DeepSeek's caches K and V
# expanded per head, not the latent a server keeps: the calculator sizes the latent).
CACHED = sorted(set(CASES) - {"deepseek_v2", "deepseek_v3", "mpt", "bloom", "gpt2", "gptj", "gpt_neox", "falcon"})


def cached_elements(cache) -> int:
    """Every K, V and state element transformers' cache holds, whatever layer kinds it has."""
    total = 0
    for layer in cache.layers:
        for name, held in vars(layer).items():
            if name in ("keys", "values") and torch.is_tensor(held):
                total += held.numel()
            elif name in ("conv_states", "recurrent_states") and isinstance(held, dict):
                total += sum(t.numel() for t in held.values() if torch.is_tensor(t))
    return total


@pytest.mark.parametrize("family", CACHED)
def test_the_cache_transformers_fills_holds_what_the_geometry_says(family):
    """After a 40-token prompt and one decoded token: K and V of every token on global layers, of the window
    (or chunk) on the others, and each state-keeping layer's state. transformers keeps a window's last W - 1
    tokens between steps (and W during one, the new token's among them): the calculator counts W."""
    config = transformers.AutoConfig.for_model(family, **CASES[family])
    torch.manual_seed(0)
    model = transformers.AutoModelForCausalLM.from_config(config).eval()
    tokens = 41
    with torch.no_grad():
        prompt = model(torch.randint(3, 300, (1, tokens - 1)), use_cache=True)
        step = model(torch.randint(3, 300, (1, 1)), cache=prompt.past_key_values, use_cache=True)
    geometry = read_geometry(config.to_dict())
    between_steps = sum(geometry.kv_elements(i) for i, w in enumerate(geometry.windows) if w and w < tokens)
    assert cached_elements(step.past_key_values) == \
        geometry.kv_elements_for(tokens) - between_steps + sum(geometry.state_elements)
