"""References for the decoding record, written here from the definitions, independent of txviz's
sampler and cache: the sampler's distribution, a sampled run that recomputes the whole sequence
every step, and the logit lens of a full sequence."""

from __future__ import annotations

import torch
from torch.nn import functional as F

from txviz.capture import trace


def reference_sampler_probs(logits: torch.Tensor, temperature: float, top_k: int | None = None,
                            top_p: float | None = None) -> torch.Tensor:
    """(V,) logits → (V,) the distribution a token is drawn from. Top-k keeps the k largest tempered
    logits; top-p then keeps, in order of probability, tokens until their mass reaches p (the
    first always); the kept ones are renormalised. Greedy (temperature 0) is one-hot."""
    logits = logits.float()
    if temperature == 0:
        return F.one_hot(logits.argmax(), logits.shape[0]).float()
    scaled = logits / temperature
    order = torch.argsort(scaled, descending=True)
    keep = torch.zeros_like(scaled, dtype=torch.bool)
    n_keep = len(order) if top_k is None else min(top_k, len(order))
    if top_p is not None:
        tempered = torch.softmax(scaled[order[:n_keep]], dim=0)
        reached = 0.0
        for i, p in enumerate(tempered.tolist()):
            if reached >= top_p:
                n_keep = i
                break
            reached += p
    keep[order[:n_keep]] = True
    return torch.softmax(scaled.masked_fill(~keep, float("-inf")), dim=0)


@torch.inference_mode()
def recomputed_run(model, prompt: list[int], n_new: int, temperature: float = 0.0, top_k: int | None = None,
                   top_p: float | None = None, seed: int = 0) -> tuple[list[int], list[torch.Tensor], list[torch.Tensor]]:
    """Tokens, each step's raw logits (V,) and sampler distribution (V,), recomputing the whole
    sequence every step (no cache) and drawing with torch.multinomial from a generator seeded once."""
    generator = torch.Generator().manual_seed(seed)
    ids, logits_per_step, probs_per_step = list(prompt), [], []
    for _ in range(n_new):
        logits = model(torch.tensor([ids]))[0, -1]
        probs = reference_sampler_probs(logits, temperature, top_k, top_p)
        token = int(probs.argmax()) if temperature == 0 else int(torch.multinomial(probs, 1, generator=generator))
        logits_per_step.append(logits)
        probs_per_step.append(probs)
        ids.append(token)
    return ids[len(prompt):], logits_per_step, probs_per_step


@torch.inference_mode()
def lens_of_sequence(model, ids: list[int]) -> torch.Tensor:
    """(L+1, T, V) the logit lens at every position of ``ids``, from one forward pass without a cache:
    each residual point through the final norm, the unembedding and the final soft-cap."""
    residuals = trace(model, torch.tensor([ids]), capture=("resid",))["resid"][:, 0]  # (L+1, T, d)
    logits = F.linear(model.final_norm(residuals), model.unembedding)
    cap = model.config.final_softcap
    return (logits if cap is None else cap * torch.tanh(logits / cap)).float()
