"""The per-step record ``txviz generate`` adds with ``--candidates N``: its options (refused at parse
time where argparse can tell, against the model's layers and vocabulary before anything runs), the
record they ask txviz.decoding for, and the steps as text for a person (``--json`` lists them whole,
as txviz.decoding.export writes them)."""

from __future__ import annotations

import argparse

from txviz.cli.validators import positive

MAX_CANDIDATES = 1000  # per step: each is a dict in the JSON, so a whole vocabulary is never listed


def add_step_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--candidates", type=lambda text: positive(text, MAX_CANDIDATES), default=None, metavar="N",
                   help=f"add `steps`, one per new token: the N most probable tokens by the raw logits (1 to "
                        f"{MAX_CANDIDATES} and at most the vocabulary) with their softmax and the sampler's "
                        "renormalised probability, and the KV cache's bytes")
    p.add_argument("--lens", action="store_true",
                   help="with --candidates: each step's logit-lens rank of the chosen token after every layer, "
                        "and the first layer that ranks it first")
    p.add_argument("--attention-layers", type=layer_list, default=(), metavar="L,L,...",
                   help="with --candidates: keep the new token's attention row, every head, on these layers "
                        "(counted from 0), e.g. 0,15,29")


def layer_list(text: str) -> tuple[int, ...]:
    """argparse type: "0,15,29" → (0, 15, 29); the model's own count is checked once it is known."""
    layers = []
    for item in text.split(","):
        try:
            layers.append(int(item))
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected layer numbers separated by commas, got {text!r}") from None
        if layers[-1] < 0:
            raise argparse.ArgumentTypeError(f"layers are counted from 0, got {layers[-1]}")
    return tuple(sorted(set(layers)))


def wants_steps(args) -> bool:
    """Whether the steps are asked for; a ValueError where --lens or --attention-layers come without it."""
    if args.candidates is None and (args.lens or args.attention_layers):
        raise ValueError("--lens and --attention-layers add to each step's record: give --candidates N too")
    return args.candidates is not None


def step_request(args, config):
    """The record ``args`` ask for, or a ValueError naming the option the model cannot satisfy."""
    from txviz.decoding import StepRecordRequest
    if args.candidates > config.vocab_size:
        raise ValueError(f"--candidates {args.candidates:,} is more than the model's vocabulary of "
                         f"{config.vocab_size:,} tokens")
    outside = [layer for layer in args.attention_layers if layer >= config.n_layers]
    if outside:
        raise ValueError(f"--attention-layers {','.join(map(str, outside))}: the model has {config.n_layers} "
                         f"layers (0..{config.n_layers - 1})")
    return StepRecordRequest(candidates=args.candidates, lens=args.lens, lens_after_run=args.lens,
                             attention_layers=args.attention_layers)


def token_text(tokenizer):
    """A token id → its readable text, None for ids the model has past the tokenizer's vocabulary."""
    return lambda token: tokenizer.display(token) if token < tokenizer.vocab_size else None


def print_steps(steps: list[dict]) -> None:
    """One line per step: the token drawn (its rank and probabilities), where the lens first ranked it
    first, and the candidates."""
    for step in steps:
        decided = "" if "first_top1_layer" not in step else f"  top-1 {_point(step['first_top1_layer'])}"
        print(f"{step['index']:4d}  {step['text']!r}  rank {step['rank']}  p {step['prob']:.3f}  "
              f"sampled {step['prob_sampled']:.3f}{decided}")
        print("      " + ", ".join(f"{c['text']!r} {c['prob']:.3f}/{c['prob_sampled']:.3f}"
                                   for c in step["candidates"]))


def _point(first_top1_layer: int | None) -> str:
    """The lens' point 0 is the embedding, point i the output of layer i − 1 (txviz.decoding.lens)."""
    if first_top1_layer is None:
        return "at no layer"
    return "at the embedding" if first_top1_layer == 0 else f"after layer {first_top1_layer - 1}"
