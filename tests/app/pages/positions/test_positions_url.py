"""The Positions page's link follows a model switch at once: a layer and head the new model lacks are
clamped in the page and in the URL in the same run, as on the Attention page."""

from __future__ import annotations

from tests.helpers.apptest import no_errors, open_at, pick_model
from txviz.loading.zoo import SHIPPED_ZOO


def test_a_switch_that_clamps_the_layer_writes_the_clamped_layer_to_the_url():
    at = open_at("positions", str(SHIPPED_ZOO / "deep_narrow"), "Mary had a red kite.")
    at.slider(key="layer").set_value(6).run()
    at.number_input(key="head").set_value(3).run()
    no_errors(at)
    assert (at.query_params["layer"], at.query_params["head"]) == ("6", "3")
    pick_model(at, "shallow_wide").run()  # 2 layers: layer 6 is clamped to 1
    no_errors(at)
    assert at.slider(key="layer").value == 1
    assert (at.query_params["layer"], at.query_params["head"]) == ("1", "3")
