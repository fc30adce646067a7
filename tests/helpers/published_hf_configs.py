"""config.json files of published checkpoints, as plain dicts, for reading configs without weights.

Written after the config.json of the Hugging Face repository named beside each: the architectural
fields as published, plus some of the training and generation fields a reader must skip over.
QWEN2_5_7B_YARN adds the rope_scaling block Qwen2.5's model card tells long-context users to add;
TRANSFORMERS_5_LLAMA is Llama 3.1 in the spelling transformers 5 writes (one ``rope_parameters``
dict that holds ``rope_theta`` too).
"""

# meta-llama/Llama-2-7b-hf
LLAMA_2_7B = {"architectures": ["LlamaForCausalLM"], "bos_token_id": 1, "eos_token_id": 2, "hidden_act": "silu",
              "hidden_size": 4096, "initializer_range": 0.02, "intermediate_size": 11008,
              "max_position_embeddings": 4096, "model_type": "llama", "num_attention_heads": 32,
              "num_hidden_layers": 32, "num_key_value_heads": 32, "pretraining_tp": 1, "rms_norm_eps": 1e-05,
              "rope_scaling": None, "tie_word_embeddings": False, "torch_dtype": "float16",
              "transformers_version": "4.31.0.dev0", "use_cache": True, "vocab_size": 32000}
# meta-llama/Meta-Llama-3-8B
LLAMA_3_8B = {"architectures": ["LlamaForCausalLM"], "attention_bias": False, "attention_dropout": 0.0,
              "bos_token_id": 128000, "eos_token_id": 128001, "hidden_act": "silu", "hidden_size": 4096,
              "initializer_range": 0.02, "intermediate_size": 14336, "max_position_embeddings": 8192,
              "model_type": "llama", "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 8,
              "pretraining_tp": 1, "rms_norm_eps": 1e-05, "rope_scaling": None, "rope_theta": 500000.0,
              "tie_word_embeddings": False, "torch_dtype": "bfloat16", "transformers_version": "4.40.0.dev0",
              "use_cache": True, "vocab_size": 128256}
# meta-llama/Llama-3.1-8B
LLAMA_3_1_8B = {**LLAMA_3_8B, "eos_token_id": [128001, 128008, 128009], "max_position_embeddings": 131072,
                "mlp_bias": False, "rope_scaling": {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                                                    "original_max_position_embeddings": 8192, "rope_type": "llama3"}}
# HuggingFaceTB/SmolLM2-135M
SMOLLM2_135M = {"architectures": ["LlamaForCausalLM"], "attention_bias": False, "bos_token_id": 0,
                "eos_token_id": 0, "hidden_act": "silu", "hidden_size": 576, "intermediate_size": 1536,
                "max_position_embeddings": 8192, "model_type": "llama", "num_attention_heads": 9,
                "num_hidden_layers": 30, "num_key_value_heads": 3, "pretraining_tp": 1, "rms_norm_eps": 1e-05,
                "rope_scaling": None, "rope_theta": 100000, "tie_word_embeddings": True, "torch_dtype": "bfloat16",
                "vocab_size": 49152}
# mistralai/Mistral-7B-v0.1
MISTRAL_7B_V01 = {"architectures": ["MistralForCausalLM"], "bos_token_id": 1, "eos_token_id": 2, "hidden_act": "silu",
                  "hidden_size": 4096, "initializer_range": 0.02, "intermediate_size": 14336,
                  "max_position_embeddings": 32768, "model_type": "mistral", "num_attention_heads": 32,
                  "num_hidden_layers": 32, "num_key_value_heads": 8, "rms_norm_eps": 1e-05, "rope_theta": 10000.0,
                  "sliding_window": 4096, "tie_word_embeddings": False, "torch_dtype": "bfloat16",
                  "use_cache": True, "vocab_size": 32000}
# mistralai/Mistral-7B-v0.3
MISTRAL_7B_V03 = {**MISTRAL_7B_V01, "rope_theta": 1000000.0, "sliding_window": None, "vocab_size": 32768}
# mistralai/Mixtral-8x7B-v0.1
MIXTRAL_8X7B = {"architectures": ["MixtralForCausalLM"], "attention_dropout": 0.0, "bos_token_id": 1,
                "eos_token_id": 2, "hidden_act": "silu", "hidden_size": 4096, "initializer_range": 0.02,
                "intermediate_size": 14336, "max_position_embeddings": 32768, "model_type": "mixtral",
                "num_attention_heads": 32, "num_experts_per_tok": 2, "num_hidden_layers": 32,
                "num_key_value_heads": 8, "num_local_experts": 8, "output_router_logits": False,
                "rms_norm_eps": 1e-05, "rope_theta": 1e6, "router_aux_loss_coef": 0.02, "sliding_window": None,
                "tie_word_embeddings": False, "torch_dtype": "bfloat16", "use_cache": True, "vocab_size": 32000}
# Qwen/Qwen2-7B
QWEN2_7B = {"architectures": ["Qwen2ForCausalLM"], "attention_dropout": 0.0, "bos_token_id": 151643,
            "eos_token_id": 151643, "hidden_act": "silu", "hidden_size": 3584, "initializer_range": 0.02,
            "intermediate_size": 18944, "max_position_embeddings": 131072, "max_window_layers": 28,
            "model_type": "qwen2", "num_attention_heads": 28, "num_hidden_layers": 28, "num_key_value_heads": 4,
            "rms_norm_eps": 1e-06, "rope_theta": 1000000.0, "sliding_window": 131072, "tie_word_embeddings": False,
            "torch_dtype": "bfloat16", "use_cache": True, "use_sliding_window": False, "vocab_size": 152064}
# Qwen/Qwen2-0.5B
QWEN2_0_5B = {**QWEN2_7B, "hidden_size": 896, "intermediate_size": 4864, "num_attention_heads": 14,
              "num_hidden_layers": 24, "num_key_value_heads": 2, "max_window_layers": 24,
              "max_position_embeddings": 32768, "sliding_window": 32768, "tie_word_embeddings": True,
              "vocab_size": 151936}
# Qwen/Qwen2.5-7B-Instruct + its model card's YaRN block
QWEN2_5_7B_YARN = {**QWEN2_7B, "max_position_embeddings": 32768,
                   "rope_scaling": {"factor": 4.0, "original_max_position_embeddings": 32768, "type": "yarn"}}
# openai-community/gpt2
GPT2_SMALL = {"activation_function": "gelu_new", "architectures": ["GPT2LMHeadModel"], "attn_pdrop": 0.1,
              "bos_token_id": 50256, "embd_pdrop": 0.1, "eos_token_id": 50256, "initializer_range": 0.02,
              "layer_norm_epsilon": 1e-05, "model_type": "gpt2", "n_ctx": 1024, "n_embd": 768, "n_head": 12,
              "n_layer": 12, "n_positions": 1024, "resid_pdrop": 0.1, "summary_activation": None,
              "summary_first_dropout": 0.1, "summary_proj_to_labels": True, "summary_type": "cls_index",
              "summary_use_proj": True, "vocab_size": 50257}
# LLAMA_3_1_8B as transformers 5 saves it
TRANSFORMERS_5_LLAMA = {**{k: v for k, v in LLAMA_3_1_8B.items() if k not in ("rope_scaling", "rope_theta")},
                        "rope_parameters": {**LLAMA_3_1_8B["rope_scaling"], "rope_theta": 500000.0}}
