"""What a config.json says that its reader did not understand, as warnings beside the figures.

A reader looks keys up through ``txviz.geometry.fields.Fields``, which remembers each one it looked at. Every
other key of the config is either one that cannot change the KV cache or the parameter count (``NEUTRAL``:
dropout, norm epsilons, initialisation, token ids, RoPE frequencies and scaling, routing and loss settings,
generation defaults, kernels) or one the figure silently assumed away: that one is named,
"`xyz` ignored: the figure assumes …", so that a family read by a rule that does not know it says so rather
than giving a confident wrong number. ``ASSUMED`` holds the keys whose value the readers take for granted:
they are named only when the config gives another value.
"""

from __future__ import annotations

import re

# Keys whose value can change no byte of the weights or the cache (exact names; see also NEUTRAL_PATTERN).
NEUTRAL = frozenset({
    "architectures", "model_type", "auto_map", "transformers_version", "torch_dtype", "dtype", "use_cache",
    "hidden_act", "hidden_activation", "activation_function", "tokenizer_class", "problem_type",
    "id2label", "label2id", "task_specific_params", "finetuning_task", "prefix", "chunk_size_feed_forward",
    "is_encoder_decoder", "is_decoder", "add_cross_attention", "tie_encoder_decoder", "torchscript",
    "pruned_heads", "tf_legacy_loss", "use_bfloat16", "cache_implementation", "max_length", "min_length",
    "do_sample", "early_stopping", "num_beams", "num_beam_groups", "diversity_penalty", "temperature", "top_k",
    "top_p", "typical_p", "repetition_penalty", "length_penalty", "no_repeat_ngram_size", "bad_words_ids",
    "num_return_sequences", "remove_invalid_values", "forced_bos_token_id", "forced_eos_token_id",
    "exponential_decay_length_penalty", "suppress_tokens", "begin_suppress_tokens",
    "encoder_no_repeat_ngram_size", "output_scores", "return_dict_in_generate",
    # attention arithmetic that holds no parameters and keeps no bytes
    "query_pre_attn_scalar", "clip_qkv", "alibi", "offset_alibi", "alibi_bias_max", "attention_softmax_in_fp32",
    "masked_softmax_fusion", "slow_but_exact", "skip_bias_add", "skip_bias_add_qkv", "pretraining_tp",
    "use_bidirectional_attention", "attn_temperature_tuning", "floor_scale", "swiglu_limit", "swiglu_alpha",
    "activation", "mamba_chunk_size", "time_step_limit", "time_step_min", "time_step_max", "time_step_floor",
    "use_parallel_residual", "apply_residual_connection_post_layernorm", "reorder_and_upcast_attn",
    "verbose", "init_device", "norm_type", "learned_pos_emb", "position_embedding_type", "for_llm_compressor", "embedding_fraction", "attn_output_gate_init", "num_logits_to_keep",
    # MoE routing: which experts run, never how many are held
    "norm_topk_prob", "scoring_func", "topk_method", "n_group", "topk_group", "ep_size", "seq_aux",
    # context the model was trained at (the context it serves is max_position_embeddings)
    "initial_context_length", "original_max_position_embeddings",
    # a second spelling of num_experts_per_tok (gpt-oss writes both)
    "experts_per_token",
})
NEUTRAL_PATTERN = re.compile(
    r"dropout|pdrop|_eps$|^eps$|epsilon|initializer|^init_|_std$|token_id|token_index|rope|rotary|^output_|"
    r"^return_|aux_loss|z_loss|jitter|softcap|scal(e|ing)|multiplier|^use_.*kernels?$|^use_mambapy$|"
    r"^use_associative_scan$|^_|^summary_|^attn_implementation$")

# Keys the readers take at one value: (that value, what the figure assumes in words).
ASSUMED: dict[str, tuple[object, str]] = {
    "no_bias": (True, "no biases in attention and MLP"),
    "mlp_bias": (False, "no biases in the MLPs"),  # read by the Llama-like families; DeepSeek's MLA reader assumes it
    "mlp_type": ("default", "a plain MLP, not a mixture of experts"),
    # Cohere 2's configs carry keys of their original release that transformers hard-codes
    "use_gated_activation": (True, "a gated (SwiGLU) MLP"),
    "order_of_interleaved_layers": ("local_attn_first", "sliding layers first in each group"),
    "use_embedding_sharing": (True, "the input and output embeddings tied"),
}


# Keys a family's transformers classes read nothing from, though other families size layers by them.
MEANING = {"layer_types": "the layers this family's transformers classes build, which read no layer_types",
           "sliding_window": "no sliding window, as this family's transformers classes keep none"}


def unread_warnings(raw: dict, seen: set[str]) -> tuple[str, ...]:
    """One warning per key of ``raw`` that no reader looked at and that could change the figures."""
    said = []
    for key, value in raw.items():
        if key in seen or key in NEUTRAL or NEUTRAL_PATTERN.search(key) or value is None:
            continue
        if key in ASSUMED:
            assumed, meaning = ASSUMED[key]
            if value == assumed:
                continue
            said.append(f"`{key}` ignored: the figure assumes {meaning}")
        else:
            said.append(f"`{key}` ignored: the figure assumes " + MEANING.get(
                key, "it changes neither the KV cache nor the parameter count"))
    return tuple(said)
