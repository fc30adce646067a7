"""Published models for the memory calculators: the shapes that set the KV cache.

Plain data, one entry per model, with where each number came from. ``n_params`` is the exact sum of
parameter shapes of the Hugging Face checkpoint's ``config.json``: for the models txviz can describe
it is ``txviz.model.counts.count_params`` of that config (tests/analysis/kv/test_memory.py recomputes several from the numbers written
out); for Falcon, Gemma 2 and DeepSeek-V3 it was summed from transformers' own classes built on the
meta device from the same config. Gemma 3 270M and Qwen3 30B-A3B, and every preset whose config.json
is in tests/helpers, are held equal to txviz.geometry's reading of that config (tests/geometry).
``unmultiplied_params`` (looked-up embedding tables, norm weights, biases) are left out of FLOPs per
token; ``qk_head_dim`` is DeepSeek's query·key width (128 + 64 RoPE).
``max_context`` is the config's ``max_position_embeddings``.
A model whose weights are published quantized (DeepSeek-V3 in fp8) carries its ``quantization_config``
and its parameters per group (embeddings, attention, dense MLP and shared experts, routed experts,
routers, norms: txviz.geometry.params.GROUPS), so that the calculator sizes it as published.
``d_model``, ``ffn_width`` and ``vocab_size`` (hidden_size, intermediate_size, vocab_size) size the
activation estimate; for a MoE ``ffn_width`` is what one token runs through: Mixtral's 2 experts of
14336, DeepSeek-V3's 8 routed + 1 shared expert of 2048 (= its dense layers' 18432).

Fields are those of ``txviz.analysis.kv.memory_model.MemoryModel``: KV cache per token per layer is
2 · kv_heads · head_dim elements, or latent_dim + rope_dim for multi-head latent attention (MLA).
``layer_groups`` lists (layer type, layers, window or chunk, state elements per sequence, layers without
positions) where the layers differ in more than a sliding window: Llama 4's chunked and NoPE layers,
Jamba's Mamba layers and Qwen3-Next's gated DeltaNet, which keep a fixed state instead of K and V.
"""

from __future__ import annotations

PRESETS: dict[str, dict] = {
    "gpt2": dict(
        name="GPT-2 (124M)", n_layers=12, n_heads=12, kv_heads=12, head_dim=64, kv_bias=True,
        d_model=768, ffn_width=3072, vocab_size=50257,
        unmultiplied_params=1024 * 768 + (2 * 12 + 1) * 2 * 768 + 12 * (3 * 768 + 768 + 3072 + 768), n_params=124_439_808, max_context=1024,
        source="openai-community/gpt2 config.json: n_layer 12, n_head 12, n_embd 768, n_positions 1024 "
               "(Radford et al. 2019); MHA"),
    "smollm2-135m": dict(
        name="SmolLM2-135M (txviz default)", n_layers=30, n_heads=9, kv_heads=3, head_dim=64,
        d_model=576, ffn_width=1536, vocab_size=49152,
        unmultiplied_params=(2 * 30 + 1) * 576, n_params=134_515_008, max_context=8192,
        source="HuggingFaceTB/SmolLM2-135M-Instruct config.json: 30 layers, hidden 576, 9 heads, "
               "3 KV heads, max_position_embeddings 8192, tied embeddings; GQA"),
    "llama-2-7b": dict(
        name="Llama 2 7B", n_layers=32, n_heads=32, kv_heads=32, head_dim=128,
        d_model=4096, ffn_width=11008, vocab_size=32000,
        unmultiplied_params=32000 * 4096 + (2 * 32 + 1) * 4096, n_params=6_738_415_616, max_context=4096,
        source="meta-llama/Llama-2-7b-hf config.json: 32 layers, hidden 4096, 32 heads, "
               "32 KV heads, intermediate 11008, vocab 32000, context 4096 (Touvron et al. 2023); MHA"),
    "llama-2-13b": dict(
        name="Llama 2 13B", n_layers=40, n_heads=40, kv_heads=40, head_dim=128,
        d_model=5120, ffn_width=13824, vocab_size=32000,
        unmultiplied_params=32000 * 5120 + (2 * 40 + 1) * 5120, n_params=13_015_864_320, max_context=4096,
        source="meta-llama/Llama-2-13b-hf config.json: 40 layers, hidden 5120, 40 heads, "
               "40 KV heads, intermediate 13824, vocab 32000, context 4096 (Touvron et al. 2023); MHA"),
    "llama-2-70b": dict(
        name="Llama 2 70B", n_layers=80, n_heads=64, kv_heads=8, head_dim=128,
        d_model=8192, ffn_width=28672, vocab_size=32000,
        unmultiplied_params=32000 * 8192 + (2 * 80 + 1) * 8192, n_params=68_976_648_192, max_context=4096,
        source="meta-llama/Llama-2-70b-hf config.json: 80 layers, hidden 8192, 64 heads, "
               "8 KV heads, intermediate 28672, vocab 32000, context 4096 (Touvron et al. 2023); GQA"),
    "llama-3-8b": dict(
        name="Llama 3 8B", n_layers=32, n_heads=32, kv_heads=8, head_dim=128,
        d_model=4096, ffn_width=14336, vocab_size=128256,
        unmultiplied_params=128256 * 4096 + (2 * 32 + 1) * 4096, n_params=8_030_261_248, max_context=8192,
        source="meta-llama/Meta-Llama-3-8B config.json: 32 layers, hidden 4096, 32 heads, "
               "8 KV heads, intermediate 14336, vocab 128256, context 8192; GQA"),
    "llama-3-70b": dict(
        name="Llama 3 70B", n_layers=80, n_heads=64, kv_heads=8, head_dim=128,
        d_model=8192, ffn_width=28672, vocab_size=128256,
        unmultiplied_params=128256 * 8192 + (2 * 80 + 1) * 8192, n_params=70_553_706_496, max_context=8192,
        source="meta-llama/Meta-Llama-3-70B config.json: 80 layers, hidden 8192, 64 heads, "
               "8 KV heads, intermediate 28672, vocab 128256, context 8192; GQA"),
    "llama-3.1-405b": dict(
        name="Llama 3.1 405B", n_layers=126, n_heads=128, kv_heads=8, head_dim=128,
        d_model=16384, ffn_width=53248, vocab_size=128256,
        unmultiplied_params=128256 * 16384 + (2 * 126 + 1) * 16384, n_params=405_853_388_800, max_context=131072,
        source="meta-llama/Llama-3.1-405B config.json: 126 layers, hidden 16384, 128 heads, "
               "8 KV heads, intermediate 53248, vocab 128256, context 131072 (Llama Team 2024); GQA"),
    "mistral-7b-v0.1": dict(
        name="Mistral 7B v0.1", n_layers=32, n_heads=32, kv_heads=8, head_dim=128, sliding_window=4096,
        d_model=4096, ffn_width=14336, vocab_size=32000,
        unmultiplied_params=32000 * 4096 + (2 * 32 + 1) * 4096, n_params=7_241_732_096, max_context=32768,
        source="mistralai/Mistral-7B-v0.1 config.json: 32 layers, hidden 4096, 32 heads, 8 KV heads, "
               "intermediate 14336, sliding_window 4096 on every layer, max_position_embeddings 32768 "
               "(Jiang et al. 2023); GQA. Later versions (v0.2+) dropped the window"),
    "mixtral-8x7b": dict(
        name="Mixtral 8×7B", n_layers=32, n_heads=32, kv_heads=8, head_dim=128,
        d_model=4096, ffn_width=28672, vocab_size=32000,
        n_experts=8, experts_per_token=2,
        unmultiplied_params=32000 * 4096 + (2 * 32 + 1) * 4096, n_params=46_702_792_704, active_params=12_879_925_248, max_context=32768,
        source="mistralai/Mixtral-8x7B-v0.1 config.json: 32 layers, hidden 4096, 32 heads, 8 KV heads, "
               "8 experts of intermediate 14336, 2 per token, no sliding window, context 32768 "
               "(Jiang et al. 2024); GQA; all experts stay in memory, 2 run per token"),
    "qwen2.5-7b": dict(
        name="Qwen2.5 7B", n_layers=28, n_heads=28, kv_heads=4, head_dim=128, kv_bias=True,
        d_model=3584, ffn_width=18944, vocab_size=152064,
        unmultiplied_params=152064 * 3584 + (2 * 28 + 1) * 3584 + 28 * (3584 + 2 * 512), n_params=7_615_616_512, max_context=131072,
        source="Qwen/Qwen2.5-7B config.json: 28 layers, hidden 3584, 28 heads, 4 KV heads, "
               "intermediate 18944, vocab 152064, q/k/v biases; 131072-token context per the model card "
               "(Qwen Team 2024); GQA"),
    "gemma-7b": dict(
        name="Gemma 7B", n_layers=28, n_heads=16, kv_heads=16, head_dim=256,
        d_model=3072, ffn_width=24576, vocab_size=256000,
        unmultiplied_params=(2 * 28 + 1) * 3072, n_params=8_537_680_896, max_context=8192,
        source="google/gemma-7b config.json: 28 layers, hidden 3072, 16 heads, 16 KV heads, "
               "head_dim 256 (not 3072/16 = 192), vocab 256000, tied embeddings, context 8192 "
               "(Gemma Team 2024); MHA"),
    "gemma-2-9b": dict(
        name="Gemma 2 9B", n_layers=42, n_heads=16, kv_heads=8, head_dim=256,
        d_model=3584, ffn_width=14336, vocab_size=256000,
        sliding_window=4096, window_layers=21, unmultiplied_params=(4 * 42 + 1) * 3584, n_params=9_241_705_984, max_context=8192,
        source="google/gemma-2-9b config.json: 42 layers, hidden 3584, 16 heads, 8 KV heads, "
               "head_dim 256, sliding_window 4096 on every other layer (21 local, 21 global), "
               "context 8192 (Gemma Team 2024); GQA"),
    "falcon-7b": dict(
        name="Falcon 7B", n_layers=32, n_heads=71, kv_heads=1, head_dim=64,
        d_model=4544, ffn_width=18176, vocab_size=65024,
        unmultiplied_params=(32 + 1) * 2 * 4544, n_params=6_921_720_704, max_context=2048,
        source="tiiuae/falcon-7b config.json: 32 layers, hidden 4544, 71 heads, multi_query true "
               "(one K/V head), head_dim 64, vocab 65024, context 2048 (Almazrouei et al. 2023); MQA"),
    "deepseek-v3": dict(
        name="DeepSeek-V3", n_layers=61, n_heads=128, kv_heads=128, head_dim=128,
        d_model=7168, ffn_width=18432, vocab_size=129280,
        latent_dim=512, rope_dim=64,
        quantization_config={"quant_method": "fp8", "weight_block_size": [128, 128]},  # weights published in fp8
        param_groups=(("embeddings", 2 * 129280 * 7168),
                      ("attention", 61 * (7168 * 1536 + 1536 * 128 * 192 + 7168 * (512 + 64) + 512 * 128 * 256
                                          + 128 * 128 * 7168)),
                      ("mlp", 3 * 3 * 7168 * 18432 + 58 * 3 * 7168 * 2048), ("experts", 58 * 256 * 3 * 7168 * 2048),
                      ("router", 58 * 256 * 7168), ("small", 61 * (2 * 7168 + 1536 + 512) + 7168)),
        qk_head_dim=128 + 64, n_experts=256, experts_per_token=8,
        unmultiplied_params=129280 * 7168 + 61 * (2 * 7168 + 1536 + 512) + 7168, n_params=671_026_404_352, active_params=37_552_282_624, max_context=163840,
        source="deepseek-ai/DeepSeek-V3 config.json: 61 layers, 128 heads, kv_lora_rank 512, "
               "qk_rope_head_dim 64, v_head_dim 128, max_position_embeddings 163840; the cache holds the "
               "512-wide latent plus one shared 64-wide RoPE key per token per layer (DeepSeek-AI 2024, "
               "'671B total, 37B activated'; n_params excludes the 14B multi-token-prediction module); MLA"),
    "gemma-3-270m": dict(
        name="Gemma 3 270M", n_layers=18, n_heads=4, kv_heads=1, head_dim=256,
        d_model=640, ffn_width=2048, vocab_size=262144, sliding_window=512, window_layers=15,
        unmultiplied_params=18 * (4 * 640 + 2 * 256) + 640, n_params=268_098_176, max_context=32768,
        source="google/gemma-3-270m config.json: 18 layers, hidden 640, 4 heads, 1 KV head, head_dim 256, "
               "sliding_window 512 on 5 of every 6 layers (15 local, 3 global), vocab 262144, tied embeddings, "
               "context 32768 (Gemma Team 2025); MQA"),
    "qwen3-30b-a3b": dict(
        name="Qwen3 30B-A3B", n_layers=48, n_heads=32, kv_heads=4, head_dim=128,
        d_model=2048, ffn_width=8 * 768, vocab_size=151936,
        n_experts=128, experts_per_token=8,
        unmultiplied_params=151936 * 2048 + 48 * (2 * 2048 + 2 * 128) + 2048,
        n_params=30_532_122_624, active_params=3_353_032_704, max_context=40960,
        source="Qwen/Qwen3-30B-A3B config.json: 48 layers, hidden 2048, 32 heads, 4 KV heads, head_dim 128, "
               "128 experts of 768, 8 per token, context 40960 (Qwen Team 2025, '30.5B total, 3.3B activated'); GQA"),
    "llama-4-scout": dict(
        name="Llama 4 Scout (17B active, 16 experts)", n_layers=48, n_heads=40, kv_heads=8, head_dim=128,
        d_model=5120, ffn_width=2 * 8192, vocab_size=202048, n_experts=16, experts_per_token=1,
        layer_groups=(("chunked_attention", 36, 8192, 0, 0), ("full_attention", 12, None, 0, 12)),
        unmultiplied_params=202048 * 5120 + 48 * 2 * 5120 + 5120,
        n_params=2 * 202048 * 5120 + 5120 + 48 * (2 * 5120 + 5120 * 7168 + 5120 * 5120 + 5120 * 16
                                                  + 16 * 3 * 5120 * 8192 + 3 * 5120 * 8192),
        active_params=2 * 202048 * 5120 + 5120 + 48 * (2 * 5120 + 5120 * 7168 + 5120 * 5120 + 5120 * 16
                                                       + 3 * 5120 * 8192 + 3 * 5120 * 8192),
        max_context=262144,
        source="meta-llama/Llama-4-Scout-17B-16E config.json (text_config): 48 layers, hidden 5120, 40 heads, "
               "8 KV heads, attention_chunk_size 8192 on the 36 RoPE layers, every 4th layer global without "
               "positions (no_rope_layers), 16 experts of 8192 + a shared one on every layer; the text model, "
               "107.8B of the '109B total'; GQA"),
    "jamba-1.5-mini": dict(
        name="Jamba 1.5 Mini (Mamba + attention)", n_layers=32, n_heads=32, kv_heads=8, head_dim=128,
        d_model=4096, ffn_width=2 * 14336, vocab_size=65536, n_experts=16, experts_per_token=2,
        layer_groups=(("mamba", 28, None, 8192 * (4 + 16), 0), ("full_attention", 4, None, 0, 4)),
        unmultiplied_params=65536 * 4096 + 64 * 4096 + 4096 + 28 * (8192 * 16 + 3 * 8192 + 256 + 2 * 16),
        n_params=51_570_323_328, active_params=12_110_311_296, max_context=262144,
        source="ai21labs/AI21-Jamba-1.5-Mini config.json: 32 layers, hidden 4096, attention on every 8th layer "
               "from the 5th (attn_layer_period 8, offset 4) with 8 KV heads and no positions, Mamba elsewhere "
               "(mamba_expand 2, "
               "d_state 16, d_conv 4: a fixed state per sequence), 16 experts, 2 per token on every other "
               "layer (AI21 2024, '52B total, 12B active'); parameters summed in tests/geometry; GQA"),
    "qwen3-next-80b-a3b": dict(
        name="Qwen3-Next 80B-A3B (gated DeltaNet + attention)", n_layers=48, n_heads=16, kv_heads=2, head_dim=256,
        d_model=2048, ffn_width=10 * 512 + 512, vocab_size=151936, n_experts=512, experts_per_token=10,
        layer_groups=(("linear_attention", 36, None, 32 * 128 * 128 + (2 * 16 * 128 + 32 * 128) * 4, 0),
                      ("full_attention", 12, None, 0, 0)),
        unmultiplied_params=151936 * 2048 + 96 * 2048 + 2048 + 12 * 512 + 36 * (64 + 128),
        n_params=79_674_391_296, active_params=3_874_929_408, max_context=262144,
        source="Qwen/Qwen3-Next-80B-A3B-Instruct config.json: 48 layers, hidden 2048, gated attention (16 heads, "
               "2 KV heads of 256) on every 4th layer, gated DeltaNet (linear_num_value_heads 32 of 128) on the "
               "others: a fixed state per sequence; 512 experts of 512, 10 per token, and a shared one "
               "(Qwen Team 2025, '80B total, 3B activated'); parameters summed in tests/geometry; GQA"),
}

# One well-known model per kind, for charts that compare kinds.
KIND_EXAMPLES = {"MHA": "llama-2-7b", "GQA": "llama-3-8b", "MQA": "falcon-7b", "MLA": "deepseek-v3"}
