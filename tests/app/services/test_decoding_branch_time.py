"""What the Decoding page says a branch saved and spent: the run's time up to and including the step it
branches at (that step's forward put the last reused token into the cache and read the distribution the
branch chose from), and the branch's own steps after it, not the run's steps it carries."""

from __future__ import annotations

from dataclasses import replace

from app.services import decoding
from txviz.decoding import branch, decode
from txviz.loading.zoo import SHIPPED_ZOO, load_zoo_model


def test_a_branch_saves_the_runs_steps_through_its_own_and_spends_only_its_steps_after():
    loaded = load_zoo_model(SHIPPED_ZOO / "base")
    run = decode(loaded.model, [1, 5, 9, 4], 6, record=decoding.record_request(loaded.config))
    run = replace(run, steps=tuple(replace(s, seconds=10.0 ** i) for i, s in enumerate(run.steps)))  # 1, 10, 100, …
    assert decoding.reaching_seconds(run, 0) == 1.0  # the prompt pass made the cache a branch at step 0 reuses
    assert decoding.reaching_seconds(run, 2) == 111.0
    other = next(c.id for c in run.steps[2].candidates if c.id != run.steps[2].token.id)
    branched = branch(loaded.model, run, 2, other)
    assert branched.reused_tokens == run.steps[2].position
    own = [s.seconds for s in branched.steps[3:]]
    assert decoding.branch_seconds(branched) == sum(own) < branched.total_seconds  # not the run's 111 s it carries
