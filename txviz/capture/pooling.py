"""A long causal attention map pooled to a few hundred cells a side, by one rule: each cell is the
largest visible weight (key ≤ query, finite) of its b×b block of tokens, NaN where no weight of the
block is visible (the block lies wholly in the future); b = ⌈max(T, S)/max_cells⌉.

The maxima are taken in one max-pooling call over whole bands of rows (any leading dimensions, e.g.
every head of a layer at once), so a map that is never whole (rebuilt from q and k a band at a time)
and a layer of stored maps pool to the same bits. A maximum is one of the weights, never a sum: it is
exact in any order."""

from __future__ import annotations

from typing import Callable

import numpy as np
import torch

MAX_MAP_CELLS = 256  # cells a side a long map is drawn at


def block_size(n_rows: int, n_cols: int, max_cells: int = MAX_MAP_CELLS) -> int:
    """Tokens a side of one cell: the smallest b that leaves at most ``max_cells`` cells a side."""
    return max(1, -(-max(n_rows, n_cols) // max_cells))


def pool_band(rows: torch.Tensor, block: int, first_row: int = 0) -> torch.Tensor:
    """(..., R, S) rows ``first_row``… of causal maps → (..., ⌈R/b⌉, ⌈S/b⌉) float32 block maxima of
    the visible weights, NaN where a block has none. ``first_row`` is a multiple of ``block``."""
    if first_row % block:
        raise ValueError(f"a band starts on a block boundary: row {first_row} with blocks of {block}")
    rows = torch.as_tensor(rows, dtype=torch.float32)
    future = torch.arange(rows.shape[-1])[None, :] > torch.arange(first_row, first_row + rows.shape[-2])[:, None]
    pooled = _block_max(rows.masked_fill(future, float("-inf")), block)
    if not torch.isfinite(pooled[pooled != float("-inf")]).all():  # a weight that is no number: pool without it
        pooled = _block_max(rows.masked_fill(future | ~torch.isfinite(rows), float("-inf")), block)
    return pooled.masked_fill(pooled == float("-inf"), float("nan"))


def _block_max(visible: torch.Tensor, block: int) -> torch.Tensor:
    """(..., R, S), -inf where hidden → (..., ⌈R/b⌉, ⌈S/b⌉) maxima of b×b blocks, in one max-pooling call."""
    *lead, r, s = visible.shape
    visible = visible.reshape(-1, 1, r, s)  # (N, 1, R, S)
    if r % block or s % block:  # whole blocks
        visible = torch.nn.functional.pad(visible, (0, -s % block, 0, -r % block), value=float("-inf"))
    pooled = torch.nn.functional.max_pool2d(visible, block)[:, 0]  # (N, ⌈R/b⌉, ⌈S/b⌉)
    return pooled.reshape(*lead, *pooled.shape[-2:])


def pool_maps(maps: torch.Tensor, max_cells: int = MAX_MAP_CELLS) -> tuple[torch.Tensor, int]:
    """(..., T, S) causal maps → (their block maxima, b): every head of a layer in one call."""
    block = block_size(maps.shape[-2], maps.shape[-1], max_cells)
    return pool_band(maps, block), block


def pool_attention(probs: np.ndarray, *, max_cells: int = MAX_MAP_CELLS) -> tuple[np.ndarray, int]:
    """One (T, S) map → ((⌈T/b⌉, ⌈S/b⌉) float32 block maxima, b)."""
    t, s = np.shape(probs)
    return pool_attention_rows(lambda start, stop: probs[start:stop], t, s, max_cells=max_cells)


def pool_attention_rows(rows_of: Callable[[int, int], object], t: int, s: int, *, max_cells: int = MAX_MAP_CELLS,
                        chunk_bands: int = 64) -> tuple[np.ndarray, int]:
    """``pool_attention`` of a (T, S) map that is never whole: ``rows_of(start, stop)`` gives rows
    start…stop−1 (an array or a tensor, e.g. rebuilt from q/k), asked for ``chunk_bands`` bands of b
    rows at a time, so an 8192² map needs no second copy."""
    block = block_size(t, s, max_cells)
    chunk_rows = block * chunk_bands
    bands = [pool_band(rows_of(start, min(start + chunk_rows, t)), block, start) for start in range(0, t, chunk_rows)]
    return torch.cat(bands).numpy() if bands else np.full((0, -(-s // block)), np.nan, np.float32), block
