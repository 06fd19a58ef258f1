"""An initial state that never settles (issue 43, item 4): reported as a violation of
the property it breaks, with its lasso, never as an unexplained exit 1."""
import json

import pytest

from rebalance.checker.engines.explore import storm_result
from rebalance.checker.properties import applicable
from rebalance.checker.settings import resolve
from rebalance.checker.system import Storm


@pytest.mark.spec("R18")
def test_a_group_that_never_settles_violates_no_rebalance_storm(rebalance_check, tmp_path):
    code, s = rebalance_check("--members", "2", "--partitions", "2", "--mutation", "rejoin-after-every-assignment")
    assert code == 1 and s["verdict"] == "violated"
    cx = s["counterexample"]
    assert cx["property"] == "no_rebalance_storm" and 0 < cx["loop_start"] < cx["length"]
    assert "never settles" in cx["reason"]
    status = {p["name"]: p["status"] for p in s["properties"]}
    assert status["no_rebalance_storm"] == "violated" and {v for k, v in status.items() if k != "no_rebalance_storm"} == {
        "incomplete"}
    steps = json.loads((tmp_path / cx["files"]["json"]).read_text())
    assert steps  # the lasso is written like any counterexample


def test_the_lasso_closes_on_a_state_equal_up_to_renaming():
    settings = resolve({}, members=2, partitions=2, mutations=("rejoin-after-every-assignment",))
    system = settings.system()
    with pytest.raises(Storm) as caught:
        system.initial()
    r = storm_result(system, applicable(system), caught.value)
    (v,) = r.violations
    first, last = v.path[v.loop_start][1], v.path[-1][1]
    assert last.group.generation > first.group.generation  # concrete: the generations go on growing
    assert last.group.phase == first.group.phase and len(v.path) - 1 - v.loop_start == 8
