"""The KV page's figure builders as plain functions (app/memory_charts.py): the cache-slot grid of each
step, the animation's frames, and the memory bill's stacked bars and GPU line."""

from __future__ import annotations

import numpy as np
import pytest

from app.figures import memory_charts
from app.figures.memory_charts import EMPTY, GENERATED, PROMPT, cache_slots


def test_cache_slots_mark_the_prompt_the_generated_tokens_and_the_empty_rest():
    slots = cache_slots(np.array([6, 6]), position=6, prompt_len=4, capacity=8)
    assert slots.tolist() == [[PROMPT] * 4 + [GENERATED] * 2 + [EMPTY] * 2] * 2


def test_a_sliding_window_layer_holds_only_its_last_tokens():
    slots = cache_slots(np.array([7, 3]), position=7, prompt_len=4, capacity=8)
    assert slots[0].tolist() == [1, 1, 1, 1, 2, 2, 2, 0]
    assert slots[1].tolist() == [0, 0, 0, 0, 2, 2, 2, 0]  # the window of 3 dropped the prompt


def growth(n_steps: int, layers: int = 3, prompt_len: int = 5, **kwargs):
    positions = np.arange(prompt_len, prompt_len + n_steps)
    held = np.repeat(positions[:, None], layers, axis=1)
    measured = held.sum(axis=1) * 1024.0
    return positions, memory_charts.cache_growth(positions, held, measured, measured, prompt_len=prompt_len,
                                                 capacity=prompt_len + n_steps, **kwargs)


def test_growth_animation_has_a_frame_per_step_that_grows_and_opens_on_the_last():
    positions, fig = growth(6)
    assert [f.name for f in fig.frames] == [str(p) for p in positions]
    assert [len(f.data[1].y) for f in fig.frames] == [1, 2, 3, 4, 5, 6]  # the measured line, step by step
    assert [int((np.asarray(f.data[0].z) > 0).sum()) for f in fig.frames] == [3 * p for p in positions]
    np.testing.assert_array_equal(fig.data[0].z, fig.frames[-1].data[0].z)  # drawn at the last step
    assert fig.layout.sliders[0].active == 5 and len(fig.layout.sliders[0].steps) == 6
    assert fig.layout.updatemenus[0].buttons[0].label == "▶ Play"
    np.testing.assert_allclose(fig.data[2].y, np.arange(5, 11) * 3 / 1024)  # the formula, in MiB


def test_a_long_generation_is_subsampled_to_at_most_max_frames_keeping_both_ends():
    positions, fig = growth(129, max_frames=64)
    names = [int(f.name) for f in fig.frames]
    assert len(names) == 64 and names[0] == positions[0] and names[-1] == positions[-1]


@pytest.mark.parametrize("n,label", [(256, "256"), (1024, "1K"), (1536, "1.5K"), (131072, "128K"), (1 << 20, "1M")])
def test_token_labels(n, label):
    assert memory_charts.token_label(n) == label


def test_memory_bill_stacks_the_parts_under_a_gpu_line():
    parts = {"weights": np.array([10.0, 10.0]), "KV cache": np.array([1.0, 2.0]), "activations": np.array([0.5, 1.0])}
    fig = memory_charts.memory_bill([4096, 8192], parts, gpu_gib=24)
    assert fig.layout.barmode == "stack" and [t.name for t in fig.data] == list(parts)
    assert list(fig.data[0].x) == ["4K", "8K"]
    np.testing.assert_allclose(sum(np.asarray(t.y) for t in fig.data), [11.5, 13.0])
    line = fig.layout.shapes[0]
    assert (line.y0, line.y1, line.line.dash) == (24, 24, "dash")
