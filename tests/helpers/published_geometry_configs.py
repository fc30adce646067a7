"""config.json files of published checkpoints for the config-geometry readers (txviz.geometry), one per
family not already in tests/helpers/published_hf_configs.py: the architectural fields as published in the
Hugging Face repository named above each, plus some training fields a reader must skip over. Gemma 3 4B
is the multimodal config, whose text_config gives only what differs from Gemma3TextConfig's defaults.
"""

# google/gemma-3-270m config.json
GEMMA_3_270M = {
    "_sliding_window_pattern": 6, "architectures": ["Gemma3ForCausalLM"], "attention_bias": False,
    "attention_dropout": 0.0, "attn_logit_softcapping": None, "bos_token_id": 2, "eos_token_id": 1,
    "final_logit_softcapping": None, "head_dim": 256, "hidden_activation": "gelu_pytorch_tanh", "hidden_size": 640,
    "initializer_range": 0.02, "intermediate_size": 2048,
    "layer_types": (["sliding_attention"] * 5 + ["full_attention"]) * 3, "max_position_embeddings": 32768,
    "model_type": "gemma3_text", "num_attention_heads": 4, "num_hidden_layers": 18, "num_key_value_heads": 1,
    "pad_token_id": 0, "query_pre_attn_scalar": 256, "rms_norm_eps": 1e-06, "rope_local_base_freq": 10000.0,
    "rope_scaling": None, "rope_theta": 1000000.0, "sliding_window": 512, "torch_dtype": "bfloat16",
    "use_bidirectional_attention": False, "use_cache": True, "vocab_size": 262144}
# google/gemma-3-4b-it config.json (vision_config abridged)
GEMMA_3_4B_IT = {
    "architectures": ["Gemma3ForConditionalGeneration"], "boi_token_index": 255999, "eoi_token_index": 256000,
    "eos_token_id": [1, 106], "image_token_index": 262144, "initializer_range": 0.02, "mm_tokens_per_image": 256,
    "model_type": "gemma3",
    "text_config": {"hidden_size": 2560, "intermediate_size": 10240, "model_type": "gemma3_text",
                    "num_hidden_layers": 34, "rope_scaling": {"factor": 8.0, "rope_type": "linear"},
                    "sliding_window": 1024},
    "torch_dtype": "bfloat16", "transformers_version": "4.50.0.dev0",
    "vision_config": {"hidden_size": 1152, "image_size": 896, "intermediate_size": 4304,
                      "model_type": "siglip_vision_model",
                      "num_attention_heads": 16, "num_hidden_layers": 27, "patch_size": 14, "vision_use_head": False}}
# google/gemma-2b config.json
GEMMA_2B = {
    "architectures": ["GemmaForCausalLM"], "attention_bias": False, "bos_token_id": 2, "eos_token_id": 1,
    "head_dim": 256, "hidden_act": "gelu", "hidden_size": 2048, "initializer_range": 0.02, "intermediate_size": 16384,
    "max_position_embeddings": 8192, "model_type": "gemma", "num_attention_heads": 8, "num_hidden_layers": 18,
    "num_key_value_heads": 1, "pad_token_id": 0, "rms_norm_eps": 1e-06, "rope_scaling": None, "rope_theta": 10000.0,
    "torch_dtype": "bfloat16", "vocab_size": 256000}
# google/gemma-2-9b config.json
GEMMA_2_9B = {
    "architectures": ["Gemma2ForCausalLM"], "attention_bias": False, "attn_logit_softcapping": 50.0,
    "bos_token_id": 2, "cache_implementation": "hybrid", "eos_token_id": 1, "final_logit_softcapping": 30.0,
    "head_dim": 256, "hidden_act": "gelu_pytorch_tanh", "hidden_activation": "gelu_pytorch_tanh", "hidden_size": 3584,
    "intermediate_size": 14336, "max_position_embeddings": 8192, "model_type": "gemma2", "num_attention_heads": 16,
    "num_hidden_layers": 42, "num_key_value_heads": 8, "pad_token_id": 0, "query_pre_attn_scalar": 256,
    "rms_norm_eps": 1e-06, "rope_theta": 10000.0, "sliding_window": 4096, "torch_dtype": "float32",
    "vocab_size": 256000}
# Qwen/Qwen3-0.6B config.json
QWEN3_0_6B = {
    "architectures": ["Qwen3ForCausalLM"], "attention_bias": False, "attention_dropout": 0.0, "bos_token_id": 151643,
    "eos_token_id": 151645, "head_dim": 128, "hidden_act": "silu", "hidden_size": 1024, "initializer_range": 0.02,
    "intermediate_size": 3072, "max_position_embeddings": 40960, "max_window_layers": 28, "model_type": "qwen3",
    "num_attention_heads": 16, "num_hidden_layers": 28, "num_key_value_heads": 8, "rms_norm_eps": 1e-06,
    "rope_scaling": None, "rope_theta": 1000000, "sliding_window": None, "tie_word_embeddings": True,
    "torch_dtype": "bfloat16", "use_cache": True, "use_sliding_window": False, "vocab_size": 151936}
# Qwen/Qwen3-30B-A3B config.json
QWEN3_30B_A3B = {
    "architectures": ["Qwen3MoeForCausalLM"], "attention_bias": False, "decoder_sparse_step": 1, "head_dim": 128,
    "hidden_act": "silu", "hidden_size": 2048, "intermediate_size": 6144, "max_position_embeddings": 40960,
    "max_window_layers": 48, "mlp_only_layers": [], "model_type": "qwen3_moe", "moe_intermediate_size": 768,
    "norm_topk_prob": True, "num_attention_heads": 32, "num_experts": 128, "num_experts_per_tok": 8,
    "num_hidden_layers": 48, "num_key_value_heads": 4, "output_router_logits": False, "rms_norm_eps": 1e-06,
    "rope_scaling": None, "rope_theta": 1000000.0, "router_aux_loss_coef": 0.001, "sliding_window": None,
    "tie_word_embeddings": False, "torch_dtype": "bfloat16", "use_sliding_window": False, "vocab_size": 151936}
# Qwen/Qwen1.5-MoE-A2.7B config.json
QWEN1_5_MOE_A2_7B = {
    "architectures": ["Qwen2MoeForCausalLM"], "attention_dropout": 0.0, "bos_token_id": 151643,
    "decoder_sparse_step": 1, "eos_token_id": 151643, "hidden_act": "silu", "hidden_size": 2048,
    "initializer_range": 0.02, "intermediate_size": 5632, "max_position_embeddings": 8192, "max_window_layers": 21,
    "model_type": "qwen2_moe", "moe_intermediate_size": 1408, "norm_topk_prob": False, "num_attention_heads": 16,
    "num_experts": 60, "num_experts_per_tok": 4, "num_hidden_layers": 24, "num_key_value_heads": 16,
    "output_router_logits": False, "rms_norm_eps": 1e-06, "rope_theta": 1000000.0, "router_aux_loss_coef": 0.001,
    "shared_expert_intermediate_size": 5632, "sliding_window": 32768, "tie_word_embeddings": False,
    "torch_dtype": "bfloat16", "use_cache": True, "use_sliding_window": False, "vocab_size": 151936}
# microsoft/phi-2 config.json
PHI_2 = {
    "architectures": ["PhiForCausalLM"], "attention_dropout": 0.0, "bos_token_id": 50256, "embd_pdrop": 0.0,
    "eos_token_id": 50256, "hidden_act": "gelu_new", "hidden_size": 2560, "initializer_range": 0.02,
    "intermediate_size": 10240, "layer_norm_eps": 1e-05, "max_position_embeddings": 2048, "model_type": "phi",
    "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 32, "partial_rotary_factor": 0.4,
    "qk_layernorm": False, "resid_pdrop": 0.1, "rope_scaling": None, "rope_theta": 10000.0,
    "tie_word_embeddings": False, "torch_dtype": "float16", "use_cache": True, "vocab_size": 51200}
# microsoft/Phi-3-mini-4k-instruct config.json
PHI_3_MINI_4K = {
    "architectures": ["Phi3ForCausalLM"], "attention_bias": False, "attention_dropout": 0.0, "bos_token_id": 1,
    "embd_pdrop": 0.0, "eos_token_id": 32000, "hidden_act": "silu", "hidden_size": 3072, "initializer_range": 0.02,
    "intermediate_size": 8192, "max_position_embeddings": 4096, "model_type": "phi3", "num_attention_heads": 32,
    "num_hidden_layers": 32, "num_key_value_heads": 32, "original_max_position_embeddings": 4096,
    "pad_token_id": 32000, "resid_pdrop": 0.0, "rms_norm_eps": 1e-05, "rope_scaling": None, "rope_theta": 10000.0,
    "sliding_window": 2047, "tie_word_embeddings": False, "torch_dtype": "bfloat16", "use_cache": True,
    "vocab_size": 32064}
# tiiuae/falcon-7b config.json
FALCON_7B = {
    "alibi": False, "apply_residual_connection_post_layernorm": False, "architectures": ["FalconForCausalLM"],
    "attention_dropout": 0.0, "bias": False, "bos_token_id": 11, "eos_token_id": 11, "hidden_dropout": 0.0,
    "hidden_size": 4544, "initializer_range": 0.02, "layer_norm_epsilon": 1e-05, "model_type": "falcon",
    "multi_query": True, "new_decoder_architecture": False, "num_attention_heads": 71, "num_hidden_layers": 32,
    "parallel_attn": True, "torch_dtype": "bfloat16", "use_cache": True, "vocab_size": 65024}
# tiiuae/falcon-40b config.json
FALCON_40B = {
    "alibi": False, "apply_residual_connection_post_layernorm": False, "architectures": ["FalconForCausalLM"],
    "attention_dropout": 0.0, "bias": False, "bos_token_id": 11, "eos_token_id": 11, "hidden_dropout": 0.0,
    "hidden_size": 8192, "initializer_range": 0.02, "layer_norm_epsilon": 1e-05, "model_type": "falcon",
    "new_decoder_architecture": True, "num_attention_heads": 128, "num_hidden_layers": 60, "num_kv_heads": 8,
    "parallel_attn": True, "torch_dtype": "bfloat16", "use_cache": True, "vocab_size": 65024}
# EleutherAI/pythia-160m config.json
PYTHIA_160M = {
    "architectures": ["GPTNeoXForCausalLM"], "bos_token_id": 0, "eos_token_id": 0, "hidden_act": "gelu",
    "hidden_size": 768, "initializer_range": 0.02, "intermediate_size": 3072, "layer_norm_eps": 1e-05,
    "max_position_embeddings": 2048, "model_type": "gpt_neox", "num_attention_heads": 12, "num_hidden_layers": 12,
    "rotary_emb_base": 10000, "rotary_pct": 0.25, "tie_word_embeddings": False, "torch_dtype": "float16",
    "use_cache": True, "use_parallel_residual": True, "vocab_size": 50304}
# EleutherAI/gpt-j-6b config.json
GPT_J_6B = {
    "activation_function": "gelu_new", "architectures": ["GPTJForCausalLM"], "attn_pdrop": 0.0, "bos_token_id": 50256,
    "embd_pdrop": 0.0, "eos_token_id": 50256, "initializer_range": 0.02, "layer_norm_epsilon": 1e-05,
    "model_type": "gptj", "n_embd": 4096, "n_head": 16, "n_inner": None, "n_layer": 28, "n_positions": 2048,
    "resid_pdrop": 0.0, "rotary": True, "rotary_dim": 64, "tie_word_embeddings": False, "use_cache": True,
    "vocab_size": 50400}
# bigscience/bloom-560m config.json
BLOOM_560M = {
    "apply_residual_connection_post_layernorm": False, "architectures": ["BloomForCausalLM"],
    "attention_dropout": 0.0, "attention_softmax_in_fp32": True, "bos_token_id": 1, "eos_token_id": 2,
    "hidden_dropout": 0.0, "initializer_range": 0.02, "layer_norm_epsilon": 1e-05, "masked_softmax_fusion": True,
    "model_type": "bloom", "n_embed": 1024, "n_inner": None, "n_layer": 24, "num_attention_heads": 16,
    "offset_alibi": 100, "pad_token_id": 3, "pretraining_tp": 1, "skip_bias_add": True, "skip_bias_add_qkv": False,
    "slow_but_exact": False, "unk_token_id": 0, "use_cache": True, "vocab_size": 250880}
# mosaicml/mpt-7b config.json
MPT_7B = {
    "architectures": ["MPTForCausalLM"],
    "attn_config": {"alibi": True, "alibi_bias_max": 8, "attn_impl": "torch", "attn_pdrop": 0,
                    "attn_type": "multihead_attention", "attn_uses_sequence_id": False, "clip_qkv": None,
                    "prefix_lm": False, "qk_ln": False, "softmax_scale": None},
    "d_model": 4096, "emb_pdrop": 0, "embedding_fraction": 1.0, "expansion_ratio": 4, "init_device": "cpu",
    "learned_pos_emb": True, "logit_scale": None, "max_seq_len": 2048, "model_type": "mpt", "n_heads": 32,
    "n_layers": 32, "no_bias": True, "norm_type": "low_precision_layernorm", "resid_pdrop": 0,
    "torch_dtype": "bfloat16", "use_cache": False, "verbose": 0, "vocab_size": 50432}
# allenai/OLMo-7B-hf config.json
OLMO_7B = {
    "architectures": ["OlmoForCausalLM"], "attention_bias": False, "attention_dropout": 0.0, "clip_qkv": None,
    "eos_token_id": 50279, "hidden_act": "silu", "hidden_size": 4096, "initializer_range": 0.02,
    "intermediate_size": 11008, "max_position_embeddings": 2048, "model_type": "olmo", "num_attention_heads": 32,
    "num_hidden_layers": 32, "num_key_value_heads": 32, "pad_token_id": 1, "rope_scaling": None,
    "rope_theta": 10000.0, "tie_word_embeddings": False, "torch_dtype": "float32", "use_cache": True,
    "vocab_size": 50304}
# allenai/OLMo-2-1124-7B config.json
OLMO_2_7B = {
    "architectures": ["Olmo2ForCausalLM"], "attention_bias": False, "attention_dropout": 0.0, "eos_token_id": 100257,
    "hidden_act": "silu", "hidden_size": 4096, "initializer_range": 0.02, "intermediate_size": 11008,
    "max_position_embeddings": 4096, "model_type": "olmo2", "num_attention_heads": 32, "num_hidden_layers": 32,
    "num_key_value_heads": 32, "pad_token_id": 100277, "rms_norm_eps": 1e-06, "rope_scaling": None,
    "rope_theta": 500000, "tie_word_embeddings": False, "torch_dtype": "float32", "use_cache": True,
    "vocab_size": 100352}
# bigcode/starcoder2-3b config.json
STARCODER2_3B = {
    "architectures": ["Starcoder2ForCausalLM"], "attention_dropout": 0.1, "residual_dropout": 0.1,
    "embedding_dropout": 0.1, "bos_token_id": 0, "eos_token_id": 0, "hidden_act": "gelu_pytorch_tanh",
    "hidden_size": 3072, "initializer_range": 0.018042, "intermediate_size": 12288,
    "max_position_embeddings": 16384, "mlp_type": "default", "model_type": "starcoder2", "norm_epsilon": 1e-05,
    "norm_type": "layer_norm", "num_attention_heads": 24, "num_hidden_layers": 30, "num_key_value_heads": 2,
    "rope_theta": 999999.4420358813, "sliding_window": 4096, "torch_dtype": "bfloat16", "use_bias": True,
    "use_cache": True, "vocab_size": 49152}
# CohereForAI/c4ai-command-r-v01 config.json
COMMAND_R_V01 = {
    "architectures": ["CohereForCausalLM"], "attention_bias": False, "attention_dropout": 0.0, "bos_token_id": 5,
    "eos_token_id": 255001, "hidden_act": "silu", "hidden_size": 8192, "initializer_range": 0.02,
    "intermediate_size": 22528, "layer_norm_eps": 1e-05, "logit_scale": 0.0625, "max_position_embeddings": 8192,
    "model_type": "cohere", "num_attention_heads": 64, "num_hidden_layers": 40, "num_key_value_heads": 64,
    "pad_token_id": 0, "rope_theta": 8000000.0, "torch_dtype": "float16", "use_cache": True,
    "use_qk_norm": False, "vocab_size": 256000}
# deepseek-ai/DeepSeek-V3 config.json
DEEPSEEK_V3 = {
    "architectures": ["DeepseekV3ForCausalLM"], "attention_bias": False, "attention_dropout": 0.0,
    "bos_token_id": 0, "eos_token_id": 1, "ep_size": 1, "first_k_dense_replace": 3, "hidden_act": "silu",
    "hidden_size": 7168, "initializer_range": 0.02, "intermediate_size": 18432, "kv_lora_rank": 512,
    "max_position_embeddings": 163840, "model_type": "deepseek_v3", "moe_intermediate_size": 2048,
    "moe_layer_freq": 1, "n_group": 8, "n_routed_experts": 256, "n_shared_experts": 1, "norm_topk_prob": True,
    "num_attention_heads": 128, "num_experts_per_tok": 8, "num_hidden_layers": 61, "num_key_value_heads": 128,
    "num_nextn_predict_layers": 1, "q_lora_rank": 1536, "qk_nope_head_dim": 128, "qk_rope_head_dim": 64,
    "rms_norm_eps": 1e-06,
    "rope_scaling": {"beta_fast": 32, "beta_slow": 1, "factor": 40, "mscale": 1.0, "mscale_all_dim": 1.0,
                     "original_max_position_embeddings": 4096, "type": "yarn"},
    "rope_theta": 10000, "routed_scaling_factor": 2.5, "scoring_func": "sigmoid", "tie_word_embeddings": False,
    "topk_group": 4, "topk_method": "noaux_tc", "torch_dtype": "bfloat16", "use_cache": True, "v_head_dim": 128,
    "vocab_size": 129280}
# deepseek-ai/DeepSeek-V2-Lite config.json
DEEPSEEK_V2_LITE = {
    "architectures": ["DeepseekV2ForCausalLM"], "attention_bias": False, "attention_dropout": 0.0,
    "aux_loss_alpha": 0.001, "bos_token_id": 100000, "eos_token_id": 100001, "first_k_dense_replace": 1,
    "hidden_act": "silu", "hidden_size": 2048, "initializer_range": 0.02, "intermediate_size": 10944,
    "kv_lora_rank": 512, "max_position_embeddings": 163840, "model_type": "deepseek_v2",
    "moe_intermediate_size": 1408, "moe_layer_freq": 1, "n_group": 1, "n_routed_experts": 64, "n_shared_experts": 2,
    "norm_topk_prob": False, "num_attention_heads": 16, "num_experts_per_tok": 6, "num_hidden_layers": 27,
    "num_key_value_heads": 16, "q_lora_rank": None, "qk_nope_head_dim": 128, "qk_rope_head_dim": 64,
    "rms_norm_eps": 1e-06, "rope_theta": 10000, "routed_scaling_factor": 1.0, "scoring_func": "softmax",
    "tie_word_embeddings": False, "topk_group": 1, "topk_method": "greedy", "torch_dtype": "bfloat16",
    "use_cache": True, "v_head_dim": 128, "vocab_size": 102400}
# deepseek-ai/DeepSeek-V3 config.json's quantization_config (its weights are published in fp8)
DEEPSEEK_V3_FP8 = {**DEEPSEEK_V3, "quantization_config": {"activation_scheme": "dynamic", "fmt": "e4m3",
                                                          "quant_method": "fp8", "weight_block_size": [128, 128]}}
# openai/gpt-oss-120b config.json (its experts are published in mxfp4)
GPT_OSS_120B = {
    "architectures": ["GptOssForCausalLM"], "attention_bias": True, "attention_dropout": 0.0, "eos_token_id": 200002,
    "experts_per_token": 4, "head_dim": 64, "hidden_act": "silu", "hidden_size": 2880,
    "initial_context_length": 4096, "initializer_range": 0.02, "intermediate_size": 2880,
    "layer_types": ["sliding_attention", "full_attention"] * 18, "max_position_embeddings": 131072,
    "model_type": "gpt_oss", "num_attention_heads": 64, "num_experts_per_tok": 4, "num_hidden_layers": 36,
    "num_key_value_heads": 8, "num_local_experts": 128, "output_router_logits": False, "pad_token_id": 199999,
    "quantization_config": {"modules_to_not_convert": ["model.layers.*.self_attn", "model.layers.*.mlp.router",
                                                       "model.embed_tokens", "lm_head"], "quant_method": "mxfp4"},
    "rms_norm_eps": 1e-05,
    "rope_scaling": {"beta_fast": 32.0, "beta_slow": 1.0, "factor": 32.0, "original_max_position_embeddings": 4096,
                     "rope_type": "yarn", "truncate": False},
    "rope_theta": 150000, "router_aux_loss_coef": 0.9, "sliding_window": 128, "swiglu_limit": 7.0,
    "tie_word_embeddings": False, "transformers_version": "4.55.0.dev0", "use_cache": True, "vocab_size": 201088}
# google/gemma-3-27b-it config.json (vision_config abridged)
GEMMA_3_27B_IT = {
    **GEMMA_3_4B_IT,
    "text_config": {"head_dim": 128, "hidden_size": 5376, "intermediate_size": 21504, "model_type": "gemma3_text",
                    "num_attention_heads": 32, "num_hidden_layers": 62, "num_key_value_heads": 16,
                    "query_pre_attn_scalar": 168, "rope_scaling": {"factor": 8.0, "rope_type": "linear"},
                    "sliding_window": 1024}}
# meta-llama/Llama-4-Scout-17B-16E config.json (vision_config abridged): chunked attention on the RoPE
# layers, every 4th layer global and without positions; 16 routed experts and a shared one on every layer
LLAMA_4_SCOUT = {
    "architectures": ["Llama4ForConditionalGeneration"], "boi_token_index": 200080, "eoi_token_index": 200081,
    "image_token_index": 200092, "model_type": "llama4",
    "text_config": {
        "attention_bias": False, "attention_chunk_size": 8192, "attention_dropout": 0.0, "attn_scale": 0.1,
        "attn_temperature_tuning": 4, "bos_token_id": 200000, "eos_token_id": [200001, 200007, 200008],
        "floor_scale": 8192, "for_llm_compressor": False, "head_dim": 128, "hidden_act": "silu", "hidden_size": 5120,
        "initializer_range": 0.02, "interleave_moe_layer_step": 1, "intermediate_size": 8192,
        "intermediate_size_mlp": 16384, "max_position_embeddings": 262144, "model_type": "llama4_text",
        "moe_layers": list(range(48)), "no_rope_layers": [1, 1, 1, 0] * 12, "num_attention_heads": 40,
        "num_experts_per_tok": 1, "num_hidden_layers": 48, "num_key_value_heads": 8, "num_local_experts": 16,
        "output_router_logits": False, "pad_token_id": 200018, "rms_norm_eps": 1e-05,
        "rope_scaling": {"factor": 8.0, "high_freq_factor": 4.0, "low_freq_factor": 1.0,
                         "original_max_position_embeddings": 8192, "rope_type": "llama3"},
        "rope_theta": 500000.0, "router_aux_loss_coef": 0.001, "router_jitter_noise": 0.0, "torch_dtype": "bfloat16",
        "use_cache": True, "use_qk_norm": True, "vocab_size": 202048},
    "tie_word_embeddings": False, "transformers_version": "4.51.0",
    "vision_config": {"hidden_size": 1408, "image_size": 336, "intermediate_size": 5632, "model_type": "llama4_vision_model",
                      "num_attention_heads": 16, "num_hidden_layers": 34, "patch_size": 14}}
# CohereForAI/c4ai-command-r7b-12-2024 config.json: 3 sliding layers with RoPE, then a global one without
COMMAND_R7B = {
    "architectures": ["Cohere2ForCausalLM"], "attention_bias": False, "attention_dropout": 0.0, "bos_token_id": 5,
    "cache_implementation": "hybrid", "eos_token_id": 255001, "head_dim": 128, "hidden_act": "silu",
    "hidden_size": 4096, "initializer_range": 0.02, "intermediate_size": 14336, "layer_norm_eps": 1e-05,
    "logit_scale": 0.25, "max_position_embeddings": 8192, "model_type": "cohere2", "num_attention_heads": 32,
    "num_hidden_layers": 32, "num_key_value_heads": 8, "order_of_interleaved_layers": "local_attn_first",
    "pad_token_id": 0, "position_embedding_type": "rope_gptj", "rope_scaling": None, "rope_theta": 50000,
    "rotary_pct": 1.0, "sliding_window": 4096, "sliding_window_pattern": 4, "torch_dtype": "bfloat16",
    "transformers_version": "4.48.0.dev0", "use_cache": True, "use_embedding_sharing": True,
    "use_gated_activation": True, "vocab_size": 256000}
# HuggingFaceTB/SmolLM3-3B config.json: every 4th layer without RoPE
SMOLLM3_3B = {
    "architectures": ["SmolLM3ForCausalLM"], "attention_bias": False, "attention_dropout": 0.0, "bos_token_id": None,
    "eos_token_id": 128012, "hidden_act": "silu", "hidden_size": 2048, "initializer_range": 0.02,
    "intermediate_size": 11008, "max_position_embeddings": 65536, "max_window_layers": 28, "mlp_bias": False,
    "model_type": "smollm3", "no_rope_layer_interval": 4, "no_rope_layers": [1, 1, 1, 0] * 9,
    "num_attention_heads": 16, "num_hidden_layers": 36, "num_key_value_heads": 4, "pad_token_id": 128004,
    "pretraining_tp": 2, "rms_norm_eps": 1e-06, "rope_scaling": None, "rope_theta": 5000000.0, "sliding_window": None,
    "torch_dtype": "bfloat16", "use_cache": False, "use_sliding_window": False, "vocab_size": 128256}
# moonshotai/Kimi-K2-Instruct config.json: DeepSeek-V3's architecture under model_type kimi_k2
KIMI_K2_INSTRUCT = {
    "architectures": ["DeepseekV3ForCausalLM"], "attention_bias": False, "attention_dropout": 0.0,
    "auto_map": {"AutoConfig": "configuration_deepseek.DeepseekV3Config",
                 "AutoModel": "modeling_deepseek.DeepseekV3Model",
                 "AutoModelForCausalLM": "modeling_deepseek.DeepseekV3ForCausalLM"},
    "aux_loss_alpha": 0.001, "bos_token_id": 163584, "eos_token_id": 163585, "ep_size": 1,
    "first_k_dense_replace": 1, "hidden_act": "silu", "hidden_size": 7168, "initializer_range": 0.02,
    "intermediate_size": 18432, "kv_lora_rank": 512, "max_position_embeddings": 131072, "model_type": "kimi_k2",
    "moe_intermediate_size": 2048, "moe_layer_freq": 1, "n_group": 1, "n_routed_experts": 384, "n_shared_experts": 1,
    "norm_topk_prob": True, "num_attention_heads": 64, "num_experts_per_tok": 8, "num_hidden_layers": 61,
    "num_key_value_heads": 64, "num_nextn_predict_layers": 0, "q_lora_rank": 1536, "qk_nope_head_dim": 128,
    "qk_rope_head_dim": 64, "rms_norm_eps": 1e-06,
    "rope_scaling": {"beta_fast": 1.0, "beta_slow": 1.0, "factor": 32.0, "mscale": 1.0, "mscale_all_dim": 1.0,
                     "original_max_position_embeddings": 4096, "type": "yarn"},
    "rope_theta": 50000.0, "routed_scaling_factor": 2.827, "scoring_func": "sigmoid", "seq_aux": True,
    "tie_word_embeddings": False, "topk_group": 1, "topk_method": "noaux_tc", "torch_dtype": "bfloat16",
    "use_cache": True, "v_head_dim": 128, "vocab_size": 163840}
# ai21labs/AI21-Jamba-1.5-Mini config.json (Jamba-v0.1's architecture): attention on 4 of 32 layers, Mamba
# on the rest; 16 experts, 2 per token, on every other layer
JAMBA_1_5_MINI = {
    "architectures": ["JambaForCausalLM"], "attention_dropout": 0.0, "attn_layer_offset": 4, "attn_layer_period": 8,
    "bos_token_id": 1, "eos_token_id": [2, 518], "expert_layer_offset": 1, "expert_layer_period": 2,
    "hidden_act": "silu", "hidden_size": 4096, "initializer_range": 0.02, "intermediate_size": 14336,
    "mamba_conv_bias": True, "mamba_d_conv": 4, "mamba_d_state": 16, "mamba_dt_rank": 256, "mamba_expand": 2,
    "mamba_proj_bias": False, "max_position_embeddings": 262144, "model_type": "jamba", "num_attention_heads": 32,
    "num_experts": 16, "num_experts_per_tok": 2, "num_hidden_layers": 32, "num_key_value_heads": 8,
    "num_logits_to_keep": 1, "output_router_logits": False, "pad_token_id": 0, "rms_norm_eps": 1e-06,
    "router_aux_loss_coef": 0.001, "sliding_window": None, "tie_word_embeddings": False, "torch_dtype": "bfloat16",
    "use_cache": True, "use_mamba_kernels": True, "vocab_size": 65536}
# Qwen/Qwen3-Next-80B-A3B-Instruct config.json: gated DeltaNet on 3 of every 4 layers, gated attention on the 4th
QWEN3_NEXT_80B = {
    "architectures": ["Qwen3NextForCausalLM"], "attention_bias": False, "attention_dropout": 0.0,
    "bos_token_id": 151643, "decoder_sparse_step": 1, "eos_token_id": 151645, "full_attention_interval": 4,
    "head_dim": 256, "hidden_act": "silu", "hidden_size": 2048, "initializer_range": 0.02, "intermediate_size": 5120,
    "linear_conv_kernel_dim": 4, "linear_key_head_dim": 128, "linear_num_key_heads": 16, "linear_num_value_heads": 32,
    "linear_value_head_dim": 128, "max_position_embeddings": 262144, "mlp_only_layers": [], "model_type": "qwen3_next",
    "moe_intermediate_size": 512, "norm_topk_prob": True, "num_attention_heads": 16, "num_experts": 512,
    "num_experts_per_tok": 10, "num_hidden_layers": 48, "num_key_value_heads": 2, "output_router_logits": False,
    "partial_rotary_factor": 0.25, "rms_norm_eps": 1e-06, "rope_scaling": None, "rope_theta": 10000000,
    "router_aux_loss_coef": 0.001, "shared_expert_intermediate_size": 512, "tie_word_embeddings": False,
    "torch_dtype": "bfloat16", "transformers_version": "4.57.0.dev0", "use_cache": True, "use_sliding_window": False,
    "vocab_size": 151936}
