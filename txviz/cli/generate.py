"""``txviz generate``: text generated with the KV cache, greedy or sampled, checked against the app's
limits and the model's context before it runs; with ``--candidates`` each step's record too
(txviz.cli.steps), drawn with the same sampler so the tokens are the ones generated without it."""

from __future__ import annotations

import torch

from txviz.cli import model_options
from txviz.cli.prompts import check_context, resolve_bos
from txviz.cli.steps import add_step_options, print_steps, step_request, token_text, wants_steps


def register(command) -> None:
    p = command("generate", "generate text with the KV cache")
    p.add_argument("--prompt", required=True)
    p.add_argument("--max-new-tokens", type=int, default=32)
    p.add_argument("--chat", action="store_true", help="wrap the prompt in the model's chat template")
    p.add_argument("--bos", choices=["auto", "none", "bos", "sink"], default="auto",
                   help="token prepended to the prompt (default auto: as the model's own tokenizer does, as "
                        "generation expects; the app's Attention views default to sink)")
    p.add_argument("--temperature", type=float, default=0.0, help="0 = greedy")
    p.add_argument("--top-k", type=int, default=None)
    p.add_argument("--top-p", type=float, default=None)
    p.add_argument("--seed", type=int, default=0)
    add_step_options(p)
    p.set_defaults(run=cmd_generate)


def cmd_generate(args) -> dict:
    from txviz.generate import Sampling, generate
    from txviz.loading.tokenizer.chat_prompt import wrap_prompt
    from txviz import limits
    with_steps = wants_steps(args)
    settings = limits.current()
    limits.check_prompt_chars(len(args.prompt), settings)
    loaded = model_options.load_model(args)
    record = step_request(args, loaded.config) if with_steps else None
    tokenizer = loaded.tokenizer
    prompt, args.bos = wrap_prompt(tokenizer, args.prompt, resolve_bos(args.bos, tokenizer), args.chat)
    ids = torch.tensor(tokenizer.encode(prompt, bos=args.bos).ids)
    check_context(len(ids), max(0, args.max_new_tokens), loaded.config.max_seq_len)
    limits.check_prompt_tokens(len(ids), loaded.config, settings, n_new=max(0, args.max_new_tokens))
    if args.max_new_tokens >= 0:
        limits.check_budget(limits.generation_estimate(loaded.config, len(ids), args.max_new_tokens,
                                                       element_bytes=loaded.dtype.itemsize), limits.current())
    sampling = Sampling(temperature=args.temperature, top_k=args.top_k, top_p=args.top_p, seed=args.seed)
    stop = () if tokenizer.eos_id is None else (tokenizer.eos_id,)
    if record is not None:
        return _generate_with_steps(args, loaded, prompt, ids, sampling, stop, record)
    result = generate(loaded.model, ids, args.max_new_tokens, sampling=sampling, stop_ids=stop)
    new_ids = list(result.new_ids)
    text = tokenizer.decode(new_ids, skip_special=True)
    if not args.json:
        print(text)
    return {"prompt": prompt, "prompt_ids": ids.tolist(), "text": text, "new_ids": new_ids,
            "kv_cache_bytes": [step.cache_bytes for step in result.steps]}


def _generate_with_steps(args, loaded, prompt: str, ids, sampling, stop, record) -> dict:
    """The same generation through txviz.decoding.decode (the same prefill, decode step and draw),
    each step recorded as ``record`` asks."""
    from txviz.decoding import decode
    from txviz.decoding.export import steps_json
    run = decode(loaded.model, ids, args.max_new_tokens, sampling=sampling, record=record, stop_ids=stop,
                 token_text=token_text(loaded.tokenizer))
    new_ids = list(run.new_ids)
    text = loaded.tokenizer.decode(new_ids, skip_special=True)
    steps = steps_json(run)
    if not args.json:
        print(text)
        print_steps(steps)
    return {"prompt": prompt, "prompt_ids": ids.tolist(), "text": text, "new_ids": new_ids,
            "kv_cache_bytes": [step.kv_bytes for step in run.steps], "steps": steps}
