"""Guards on `rebalance check` (issue 17 item 7): time and memory limits stop a run
with exit 3 and the figures reached; a configuration beyond reach is warned about
up front; a mutation that changes nothing under the chosen protocol is bad input."""
import pytest

from conftest import run_cli

from rebalance.checker.engines.guards import estimate_states
from rebalance.checker.settings import resolve
from rebalance.model.config import PROTOCOLS, ConfigError, GroupConfig
from rebalance.model.mutations import REGISTRY


def test_max_seconds_stops_with_the_figures_reached(rebalance_check):
    code, s = rebalance_check("--members", "3", "--partitions", "4", "--max-seconds", "1")
    assert code == 3 and s["verdict"] == "incomplete" and s["limit"] == "max_seconds 1"
    assert s["distinct_states"] > 1000 and s["transitions"] > s["distinct_states"] and s["max_depth"] > 0
    assert 0.5 <= s["seconds"] < 5 and s["peak_rss_mb"] > 10
    assert {p["status"] for p in s["properties"] if p["expected"] == "holds"} == {"incomplete"}
    assert "--walks" in s["warnings"][0]  # an estimated 3.7e5 states do not fit in a second


def test_max_memory_stops_with_the_figures_reached(rebalance_check):
    # the main job's exploration passes 80 MB (its peak 98 MB on 2026-11-26, the CLI's start included)
    code, s = rebalance_check("--members", "3", "--partitions", "4", "--max-memory", "80")
    assert code == 3 and s["limit"] == "max_memory 80 MB" and s["peak_rss_mb"] > 75
    assert s["distinct_states"] > 1000


def test_within_reach_no_warning_and_no_limit(rebalance_check):
    code, s = rebalance_check("--members", "2", "--partitions", "2", "--faults", "join,leave", "--max-faults", "1")
    assert code == 0 and s["warnings"] == [] and s["limit"] is None


def test_beyond_reach_warns_up_front_pointing_to_walks(tmp_path):
    code, out, err = run_cli("check", "--members", "10", "--partitions", "100", "--max-seconds", "1",
                             "--out", tmp_path / "o", cwd=tmp_path)
    assert code == 3 and "beyond exhaustive reach" in err and "--walks" in err
    assert "stopped at max_seconds 1" in out


def test_estimate_is_within_an_order_of_magnitude_of_measured_runs():
    # (members, joiners, partitions, faults, budget) -> distinct states measured (checker/engines/guards.py)
    every = ("join", "leave", "crash", "restart", "pause")
    for args, measured in [((2, 1, 2, every, 2), 17_126), ((3, 1, 4, every, 2), 492_020),
                           ((3, 1, 4, every, 1), 4_846), ((4, 1, 4, every[:4], 2), 214_151),
                           ((3, 1, 4, ("join", "leave"), 2), 27_263), ((2, 1, 2, ("crash", "restart"), 4), 765),
                           ((2, 1, 2, every, 1), 429), ((2, 1, 2, every, 3), 436_406),
                           ((2, 1, 2, ("crash", "restart", "pause"), 2), 5_348),
                           ((2, 1, 2, ("crash", "restart", "pause"), 4), 75_340),
                           ((3, 1, 2, every, 2), 216_635), ((3, 1, 3, every, 2), 300_731),
                           ((3, 1, 4, every, 3), 28_033_546)]:
        assert measured / 10 < estimate_states(*args) < measured * 10


@pytest.mark.parametrize("mutation", sorted(REGISTRY))
def test_every_mutation_names_its_protocols_and_is_refused_elsewhere(mutation):
    data = {"group": {"upgrade": True}} if mutation == "one-bounce-upgrade" else {}  # it changes an upgrade (R79)
    m = REGISTRY[mutation]
    for protocol in PROTOCOLS:
        if protocol in m.protocols:
            resolve(data, protocol=protocol, assignor=m.assignors[0] if m.assignors else None, mutations=(mutation,))
        else:
            with pytest.raises(ConfigError, match=f"does not apply to the {protocol} protocol"):
                resolve(data, protocol=protocol, mutations=(mutation,))


@pytest.mark.parametrize("mutation", sorted(n for n, m in REGISTRY.items() if m.assignors))
def test_an_assignors_mutation_is_refused_under_another_assignor(mutation):
    """A mutation of one assignor's rule (KIP-441's under the seed's learner
    assignor, the StickyAssignor's user data under range) changes nothing under
    another: exit 2 rather than a vacuous "holds". (Seen: KAFKA-7026's mutation
    holds under range, and is violated under both sticky assignors.)"""
    m = REGISTRY[mutation]
    protocol = m.protocols[0]
    others = (("streams", "high-availability") if protocol == "streams" else
              ("range", "roundrobin", "sticky", "cooperative-sticky"))
    for assignor in others:
        if assignor in m.assignors:
            continue
        with pytest.raises(ConfigError, match=f"does not apply to the {assignor} assignor"):
            resolve({}, protocol=protocol, assignor=assignor, mutations=(mutation,))


def test_an_inapplicable_mutation_changes_nothing_indeed():
    """The table's claim, seen on the exhaustive engine: an eager group with
    assign-before-revoke explores exactly the unmutated eager group's states."""
    from rebalance.checker.engines.explore import explore
    from rebalance.checker.system import System
    counts = []
    for mutations in (frozenset(), frozenset({"assign-before-revoke"})):
        cfg = GroupConfig(protocol="eager", assignor="cooperative-sticky", mutations=mutations)
        r = explore(System(cfg, 2, 1, ("join", "leave", "crash"), 2), ())
        counts.append((r.distinct_states, r.transitions))
    assert counts[0] == counts[1]
