"""``tokenizer_field_problem`` element by element: the first element of a wrong type is named, a bool is
not an integer, and lists of the right types (ints among the scores too) pass."""

from __future__ import annotations

import pytest

from txviz.loading.gguf.fields import tokenizer_field_problem


@pytest.mark.parametrize("key, value, named", [
    ("tokenizer.ggml.token_type", [1, 2, True, 3], "a value of type bool ('True')"),
    ("tokenizer.ggml.scores", [0.5, -1, False], "a value of type bool ('False')"),
    ("tokenizer.ggml.tokens", ["a", "b", 7, None], "a value of type int ('7')"),
    ("tokenizer.ggml.merges", ["a b", b"c d"], 'a value of type bytes ("b\'c d\'")'),
])
def test_the_first_element_of_a_wrong_type_is_named(key, value, named):
    assert tokenizer_field_problem({key: value}).endswith(f"but holds {named}")


def test_lists_of_the_right_types_pass():
    metadata = {"tokenizer.ggml.tokens": ["a", "b"] * 1000, "tokenizer.ggml.scores": [0.5, -1, 2.0],
                "tokenizer.ggml.token_type": [1, 3, 4], "tokenizer.ggml.merges": []}
    assert tokenizer_field_problem(metadata) is None
