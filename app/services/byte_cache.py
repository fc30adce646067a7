"""A process-wide cache bounded by bytes rather than by entries: every result kept for every session
(traces, scaling losses, generations, measurements) is held in one of these (app/cache.py).

``st.cache_resource(max_entries=32)`` counts entries: 32 traces of long prompts, each up to the
per-request memory budget, would fill a server. Here the least recently used entries are dropped
once their total exceeds the budget (the newest entry always stays). Like ``st.cache_resource``,
one computation per key runs at a time: sessions asking for the same key wait for it and share the
result; a computation that raises is not cached. A store of small results counts entries instead
(``size_of=lambda _: 1``, the budget then a number of entries). Pure Python, no Streamlit.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Callable, Hashable


class ByteBudgetCache:
    def __init__(self, budget_bytes: int, size_of: Callable[[object], int]):
        self.budget_bytes, self._size_of = int(budget_bytes), size_of
        self._lock = threading.Lock()
        self._values: OrderedDict[Hashable, tuple[object, int]] = OrderedDict()
        self._computing: dict[Hashable, threading.Lock] = {}

    def _lookup(self, key: Hashable):
        if key in self._values:
            self._values.move_to_end(key)
            return True, self._values[key][0]
        return False, None

    def get(self, key: Hashable, compute: Callable[[], object]) -> object:
        with self._lock:
            found, value = self._lookup(key)
            if found:
                return value
            key_lock = self._computing.setdefault(key, threading.Lock())
        with key_lock:  # one computation per key; later askers find its result
            with self._lock:
                found, value = self._lookup(key)
                if found:
                    return value
            try:
                value = compute()
                self._store(key, value)
            finally:
                with self._lock:
                    if self._computing.get(key) is key_lock:
                        del self._computing[key]
        return value

    def peek(self, key: Hashable) -> tuple[bool, object]:
        """(found, value) without computing anything: what another session already has."""
        with self._lock:
            return self._lookup(key)

    def update(self, key: Hashable, change: Callable[[object | None], object]) -> object:
        """Store ``change(the value kept, or None)`` under the lock: a read-modify-write (a list of
        recent timings) that no other session interleaves with."""
        with self._lock:
            found, value = self._lookup(key)
            value = change(value if found else None)
            self._put(key, value)
        return value

    def _store(self, key: Hashable, value: object) -> None:
        with self._lock:
            self._put(key, value)

    def _put(self, key: Hashable, value: object) -> None:  # the lock is held
        self._values[key] = (value, int(self._size_of(value)))
        self._values.move_to_end(key)
        while len(self._values) > 1 and self.nbytes > self.budget_bytes:
            self._values.popitem(last=False)

    @property
    def nbytes(self) -> int:
        return sum(size for _, size in self._values.values())

    def __len__(self) -> int:
        return len(self._values)

    def clear(self) -> None:
        with self._lock:
            self._values.clear()
