"""ByteBudgetCache.update: a read-modify-write under the lock (the recent scaling timings)."""

import threading

from app.services.byte_cache import ByteBudgetCache


def test_update_sees_the_kept_value_or_none_and_keeps_the_change():
    cache = ByteBudgetCache(3, size_of=lambda _: 1)
    assert cache.update("a", lambda old: (old or ()) + (1,)) == (1,)
    assert cache.update("a", lambda old: (old or ()) + (2,)) == (1, 2)
    assert cache.peek("a") == (True, (1, 2))


def test_update_counts_as_recent_and_respects_the_budget():
    cache = ByteBudgetCache(2, size_of=lambda _: 1)  # two entries
    cache.get("a", lambda: 1)
    cache.get("b", lambda: 2)
    cache.update("a", lambda old: old + 10)  # a is now the most recent
    cache.get("c", lambda: 3)  # b goes
    assert cache.peek("b") == (False, None) and cache.peek("a") == (True, 11) and len(cache) == 2


def test_concurrent_updates_lose_nothing():
    cache = ByteBudgetCache(10, size_of=lambda _: 1)

    def add_many():
        for _ in range(500):
            cache.update("n", lambda old: (old or 0) + 1)

    threads = [threading.Thread(target=add_many) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert cache.peek("n") == (True, 2000)
