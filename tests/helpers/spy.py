"""What a page was given: wrap one function of a module so that each call's arguments and return value
are recorded, for tests that assert on the data behind a metric or a caption rather than on its text."""

from __future__ import annotations

import functools
from dataclasses import dataclass, field


@dataclass
class Calls:
    """Each call of the wrapped function, oldest first: (args, kwargs, the value it returned)."""
    made: list[tuple[tuple, dict, object]] = field(default_factory=list)

    @property
    def last(self):
        """The value the last call returned."""
        assert self.made, "the function was never called"
        return self.made[-1][2]

    @property
    def last_args(self) -> tuple:
        assert self.made, "the function was never called"
        return self.made[-1][0]


def spy(monkeypatch, module, name: str) -> Calls:
    """Replace ``module.name`` (for this test) by a wrapper that records every call."""
    calls, original = Calls(), getattr(module, name)

    @functools.wraps(original)
    def recorded(*args, **kwargs):
        value = original(*args, **kwargs)
        calls.made.append((args, kwargs, value))
        return value

    monkeypatch.setattr(module, name, recorded)
    return calls
