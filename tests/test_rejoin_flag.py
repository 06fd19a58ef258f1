"""The rejoin-immediately flag (seed 000, Design I discussion; spec R74) and the
simulated costs it and KIP-345's admin removal save (checker/simulation.py)."""
import random
import statistics

import pytest

from conftest import EXAMPLES
from rebalance.checker.campaign import run_one
from rebalance.checker.simulation import Metrics, simulate
from rebalance.checker.situations import script
from rebalance.model import member
from rebalance.model.assignors import flag_rejoin
from rebalance.model.config import ConfigError, GroupConfig
from rebalance.model.member import MemberPhase
from rebalance.model.protocol import Assignment, JoinGroup, Subscription, SyncGroupResponse, Error, member_id

A1, B1 = member_id(0, 1), member_id(1, 1)
FLAG = GroupConfig(topics=(("t", 2),), rejoin_flag=True)


@pytest.mark.spec("R74")
def test_the_leader_flags_every_assignment_only_when_a_member_must_revoke():
    members = ((A1, 0, Subscription(0b11, 1)), (B1, 0, Subscription(0, -1)))
    moving = ((A1, Assignment(0b01)), (B1, Assignment(0)))  # A revokes t-1: a second round is owed
    assert [a.rejoin for _, a in flag_rejoin(FLAG, members, moving)] == [True, True]
    settled = ((A1, Assignment(0b01)), (B1, Assignment(0b10)))
    assert flag_rejoin(FLAG, ((A1, 0, Subscription(0b01, 2)), (B1, 0, Subscription(0, -1))), settled) == settled
    assert flag_rejoin(GroupConfig(topics=(("t", 2),)), members, moving) == moving  # off by default


@pytest.mark.spec("R74")
def test_a_member_told_to_rejoin_rejoins_at_once_though_it_revokes_nothing():
    syncing = member.Consumer(MemberPhase.SYNCING, B1, 0, 2, False, 0, -1, False)
    c, out = member.handle(FLAG, syncing, SyncGroupResponse(Error.NONE, Assignment(0, rejoin=True)))
    assert c.phase == MemberPhase.JOINING and any(type(getattr(o, "request", None)) is JoinGroup for o in out)
    c, out = member.handle(FLAG, syncing, SyncGroupResponse(Error.NONE, Assignment(0)))
    assert c.phase == MemberPhase.STABLE and not any(hasattr(o, "request") for o in out)


def test_the_flag_is_refused_under_eager():
    with pytest.raises(ConfigError, match="rejoin flag"):
        GroupConfig(protocol="eager", assignor="range", rejoin_flag=True)


@pytest.mark.spec("R74")
def test_every_property_holds_with_the_flag(rebalance_check):
    code, s = rebalance_check(str(EXAMPLES / "rejoin_flag.toml"), "--require-covers")
    assert code == 0 and s["verdict"] == "holds"
    assert all(p["status"] == "holds" for p in s["properties"])


def _mean(situation, static, n=6, **flag):
    rows = [Metrics(*run_one((i, situation, "cooperative", static, 10, 100, 1), **flag)[7:]) for i in range(n)]
    assert not any(m.censored for m in rows)
    return (statistics.mean(m.unavailable_ticks for m in rows), statistics.median(m.ticks_to_balance for m in rows))


@pytest.mark.spec("R74")
def test_the_flag_shortens_a_two_round_cooperative_scale_up():
    (off_unavailable, off_ticks), (on_unavailable, on_ticks) = _mean("scale_up", False), _mean(
        "scale_up", False, rejoin_flag=True)
    assert on_ticks < off_ticks and on_unavailable < off_unavailable / 10


@pytest.mark.spec("R71")
def test_admin_removal_spares_a_static_scale_down_the_session_timeout():
    (wait_unavailable, wait_ticks), (admin_unavailable, admin_ticks) = (_mean("scale_down", True),
                                                                        _mean("scale_down_admin", True))
    assert admin_ticks < wait_ticks / 4 and admin_unavailable < wait_unavailable / 4
    # a dynamic member left with its LeaveGroup: the admin's removal finds nobody and changes nothing
    dyn = [simulate(GroupConfig(topics=(("t", 12),)), 3, False, script(name, random.Random(7), 3), rng=random.Random(7))
           for name in ("scale_down", "scale_down_admin")]
    assert dyn[0].rebalances == dyn[1].rebalances
