"""The branch caption's words for the steps left out of the comparison: one step or a range."""

from __future__ import annotations

from app.app_pages.decoding.branch_beside import how_they_compare
from app.services.decoding import compare_branch


def test_one_uncompared_step_is_named_alone_and_several_as_a_range():
    one = compare_branch([5, 1, 2, 3], [6, 1, 2], run_cut=False, branch_cut=True)  # the branch stopped a token short
    assert one.run_compared == 3
    said = how_they_compare(one, 10, 4, 3)
    assert "The run's step 13 is not compared: the branch was stopped before it made its counterpart." in said
    several = compare_branch([5, 1, 2, 3, 4], [6, 1, 2], run_cut=False, branch_cut=True)
    assert several.run_compared == 3
    said = how_they_compare(several, 10, 5, 3)
    assert "The run's steps 13–14 are not compared: the branch was stopped before it made their counterparts." in said
