"""A branch beside its run from the branch's own step (offset 0, where it took another candidate), compared
as texts: where they differ again after it, which tokens the other's text has too even a step earlier or
later, whether they end alike, and which tokens are compared at all (a side stopped by a click made no
tokens past its end, so the other's later tokens are not marked as differing from tokens never made; a
side that ended on its own did end there)."""

from __future__ import annotations

from app.services.decoding import compare_branch


def differ(said) -> tuple:
    return set(said.run_differ), set(said.branch_differ), said.again, said.rejoin


def test_only_the_branchs_own_step_differs():
    said = compare_branch((5, 1, 2, 3), (9, 1, 2, 3), run_cut=False, branch_cut=False)
    assert differ(said) == ({0}, {0}, None, (1, 1))
    assert (said.run_compared, said.branch_compared, said.shared) == (4, 4, ((1, 1, 3),))


def test_a_branch_a_token_longer_reads_the_runs_text_again():
    said = compare_branch((5, 1, 2, 3, 4), (9, 7, 1, 2, 3, 4), run_cut=False, branch_cut=False)
    assert differ(said) == ({0}, {0, 1}, 1, (1, 2))
    assert said.shared == ((1, 2, 4),)


def test_they_differ_again_and_end_apart():
    said = compare_branch((5, 1, 2, 3), (9, 1, 7, 8), run_cut=False, branch_cut=False)
    assert differ(said) == ({0, 2, 3}, {0, 2, 3}, 2, None)


def test_a_branch_that_ended_on_its_own_differs_from_the_runs_later_tokens():
    said = compare_branch((5, 1, 2, 3, 4), (9, 1, 2), run_cut=False, branch_cut=False)
    assert differ(said) == ({0, 3, 4}, {0}, 3, None)
    assert said.run_compared == 5


def test_a_stopped_branch_leaves_the_runs_later_tokens_unmarked():
    said = compare_branch((5, 1, 2, 3, 4, 6, 7), (9, 1, 2), run_cut=False, branch_cut=True)
    assert differ(said) == ({0}, {0}, None, (1, 1))
    assert (said.run_compared, said.branch_compared) == (3, 3)
    shifted = compare_branch((5, 1, 2, 3, 4, 6), (9, 7, 1, 2), run_cut=False, branch_cut=True)
    assert differ(shifted) == ({0}, {0, 1}, 1, (1, 2))
    assert shifted.run_compared == 3
    apart = compare_branch((5, 1, 2, 3, 4, 6), (9, 1, 8), run_cut=False, branch_cut=True)
    assert differ(apart) == ({0, 2}, {0, 2}, 2, None)  # one token each after the stretch: the rest not compared
    assert apart.run_compared == 3


def test_a_stopped_run_leaves_the_branchs_later_tokens_unmarked():
    said = compare_branch((5, 1), (9, 1, 2, 3), run_cut=True, branch_cut=False)
    assert differ(said) == ({0}, {0}, None, (1, 1))
    assert said.branch_compared == 2
