"""Design III reachable (issue 17 item 8): examples/design3_checked.toml needs more
moves than max_moves, so `--protocol incremental` explores behaviour the
cooperative protocol does not: a round that moves one partition and schedules a
rebalance for the rest (cover moves_capped, spec R34)."""
import pytest

from conftest import EXAMPLES

CONFIG = EXAMPLES / "design3_checked.toml"


def _cover(s, name):
    return next((c["reached"] for c in s["covers"] if c["name"] == name), None)


@pytest.mark.slow  # about 30-60 s: the default suite stays under 20 minutes
@pytest.mark.spec("R34")
def test_incremental_moves_capped_where_cooperative_cannot(rebalance_check, tmp_path):
    code, inc = rebalance_check(CONFIG)
    assert code == 0 and inc["verdict"] == "holds" and _cover(inc, "moves_capped") is True
    code, coop = rebalance_check(CONFIG, "--protocol", "cooperative")
    assert code == 0 and _cover(coop, "moves_capped") is None  # not even applicable
    assert inc["distinct_states"] != coop["distinct_states"]
    # with room for every move in one round (the bound the default configuration is at),
    # the cover is not reached: it is not a pass over nothing
    roomy = tmp_path / "roomy.toml"
    roomy.write_text(CONFIG.read_text().replace("max_moves = 1", "max_moves = 2"))
    code, s = rebalance_check(roomy)
    assert code == 0 and _cover(s, "moves_capped") is False
