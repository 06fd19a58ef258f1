"""KIP-848's online migration between classic and consumer groups (spec/KIP848.md, "Online
migration", M1-M7): the pure handlers of model/consumer_group/migration.py and
classic_members.py, driven step by step from a classic group two classic members formed."""
import pytest

from rebalance.checker.settings import load_toml, resolve
from rebalance.checker.engines.explore import explore
from rebalance.checker.properties import applicable, applicable_covers
from rebalance.model.config import GroupConfig
from rebalance.model.consumer_group.group import ConsumerGroup, find
from rebalance.model.consumer_group.messages import ConsumerGroupHeartbeat, MemberState
from rebalance.model.consumer_group.migration import handle
from rebalance.model.coordinator import EMPTY_GROUP, Group
from rebalance.model.protocol import (
    KIP848_IDS, NO_INSTANCE_ID, Error, Heartbeat, JoinGroup, LeaveGroup, OffsetCommit, Phase, Receive, SessionTimeout, Subscription,
    SyncGroup, connection, instance_id, member_id,
)
from conftest import EXAMPLES

CFG = GroupConfig(topics=(("t", 2),), protocol="consumer", assignor="uniform", migration=2)
A1, B1 = member_id(0, 1), member_id(1, 1)
C = member_id(2, KIP848_IDS | 1)  # the consumer-protocol process of slot 2
CONN_A, CONN_B, CONN_C = connection(0, 1), connection(1, 1), connection(2, 1)


def classic_group(static=False) -> Group:
    """The settled classic group of examples/kip848/migration.toml: A1 owns t-0, B1 t-1, generation 1."""
    settings = resolve(load_toml(EXAMPLES / "kip848" / "migration.toml"), static=True if static else None)
    group = settings.system().initial().group
    assert type(group) is Group and group.phase == Phase.STABLE and group.generation == 1
    assert [(m.member_id, m.assignment.partitions) for m in group.members] == [(A1, 1), (B1, 2)]
    return group


def step(group, conn, request, cfg=CFG):
    group, replies = handle(cfg, group, Receive(conn, request))
    return group, [r.response for r in replies]


def join_c(group, cfg=CFG):
    return step(group, CONN_C, ConsumerGroupHeartbeat(C, 0, topics=-1, owned=0), cfg)


@pytest.mark.spec("M1")
def test_a_consumer_protocol_join_upgrades_the_classic_group_each_member_keeping_its_assignment():
    group, responses = join_c(classic_group())
    assert type(group) is ConsumerGroup
    assert responses[-1].error == Error.NONE and responses[-1].member_id == C
    # the group epoch starts at the generation and the join bumps it; the classic members keep theirs
    assert group.epoch == group.target_epoch == 2
    a, b = find(group, A1), find(group, B1)
    assert (a.epoch, a.assigned, a.classic[0]) == (1, 1, CONN_A) and (b.epoch, b.assigned, b.classic[0]) == (1, 2, CONN_B)
    assert group.partition_epochs == (1, 1)  # both still held at the classic generation
    # the new member waits for what the classic members hold (uniform keeps theirs; it gets none of 2)
    assert find(group, C).state == MemberState.STABLE and find(group, C).assigned == 0


@pytest.mark.spec("M1")
def test_an_upgrade_answers_held_joins_and_keeps_assignments_through_preparing_rebalance():
    group = classic_group()
    group, _ = step(group, CONN_A, JoinGroup(A1, Subscription(1, 1)))  # A rejoins: a rebalance, A's join held
    assert group.phase == Phase.PREPARING_REBALANCE
    # Kafka keeps stored assignments through PreparingRebalance (GroupMetadataManager.java:3181)
    assert [m.assignment.partitions for m in group.members] == [1, 2]
    group, responses = join_c(group)
    assert responses[0].error == Error.REBALANCE_IN_PROGRESS and responses[0].member_id == A1  # the held JoinGroup
    assert find(group, A1).assigned == 1 and find(group, B1).assigned == 2


@pytest.mark.spec("M1")
def test_an_empty_classic_group_gives_way_and_only_a_join_converts():
    empty = EMPTY_GROUP._replace(generation=3, issued=((0, 1),))
    group, responses = join_c(empty)
    assert type(group) is ConsumerGroup and group.epoch == 1 and group.issued == ((0, 1),)
    group, responses = step(classic_group(), CONN_C, ConsumerGroupHeartbeat(C, 4, topics=-1, owned=0))
    assert type(group) is Group and responses[0].error == Error.GROUP_ID_NOT_FOUND
    kept = GroupConfig(topics=(("t", 2),), protocol="consumer", assignor="uniform", migration=2,
                       mutations=frozenset({"empty-classic-group-kept"}))  # KAFKA-16313
    group, responses = join_c(empty, kept)
    assert group == empty and responses[0].error == Error.GROUP_ID_NOT_FOUND


@pytest.mark.spec("M3", "M4", "M5")
def test_a_classic_member_reconciles_through_join_and_sync_and_is_told_to_rejoin_by_heartbeat():
    group, _ = join_c(classic_group())
    # C takes no partition of 2 while A and B hold theirs: nothing moves, but A and B are behind the target epoch
    group, [r] = step(group, CONN_A, Heartbeat(A1, 1))
    assert r.error == Error.REBALANCE_IN_PROGRESS
    group, [r] = step(group, CONN_A, Heartbeat(A1, 2))
    assert r.error == Error.ILLEGAL_GENERATION
    group, [r] = step(group, CONN_A, SyncGroup(A1, 1, ()))
    assert r.error == Error.REBALANCE_IN_PROGRESS  # the target epoch is ahead of it
    group, [r] = step(group, CONN_A, JoinGroup(A1, Subscription(1, 1)))
    assert (r.error, r.member_id, r.generation, r.leader) == (Error.NONE, A1, 2, 0)  # a follower at its member epoch
    group, [r] = step(group, CONN_A, SyncGroup(A1, 1, ()))
    assert r.error == Error.ILLEGAL_GENERATION
    group, [r] = step(group, CONN_A, SyncGroup(A1, 2, ()))
    assert r.error == Error.NONE and r.assignment.partitions == find(group, A1).assigned
    group, [r] = step(group, CONN_A, Heartbeat(A1, 2))
    assert r.error == Error.NONE
    # a classic member commits with its generation as member epoch: a newer one is ILLEGAL_GENERATION, an older
    # one accepted for what it holds since then (KIP-1251: A1 holds t-0 since generation 1)
    group, [r] = step(group, CONN_A, OffsetCommit(A1, 3, 1))
    assert r.error == Error.ILLEGAL_GENERATION
    group, [r] = step(group, CONN_A, OffsetCommit(A1, 1, 1))
    assert r.error == Error.NONE
    group, [r] = step(group, CONN_B, Heartbeat(member_id(1, 7), 1))
    assert r.error == Error.UNKNOWN_MEMBER_ID


@pytest.mark.spec("M3")
def test_a_new_classic_member_joins_a_consumer_group_under_an_issued_member_id():
    group, _ = join_c(classic_group())
    group, [r] = step(group, connection(3, 1), JoinGroup(0, Subscription(0, -1)))
    assert r.error == Error.NONE and r.member_id == member_id(3, 1) and find(group, r.member_id).classic
    assert dict(group.issued)[3] == 1 and r.generation == find(group, r.member_id).epoch


@pytest.mark.spec("M2", "M6")
def test_the_last_consumer_protocol_member_leaving_downgrades_and_a_classic_one_leaving_does_not():
    upgraded, _ = join_c(classic_group())
    group, responses = step(upgraded, CONN_B, LeaveGroup(((B1, NO_INSTANCE_ID),)))
    assert type(group) is ConsumerGroup and find(group, B1) is None and responses[0].members[0][2] == Error.NONE
    group, responses = step(upgraded, CONN_C, ConsumerGroupHeartbeat(C, -1))
    assert type(group) is Group and group.phase == Phase.PREPARING_REBALANCE
    assert group.generation == upgraded.epoch  # the consumer group's epoch, not bumped by the leave
    assert [(m.member_id, m.conn) for m in group.members] == [(A1, CONN_A), (B1, CONN_B)]
    fenced, _ = handle(CFG, upgraded, SessionTimeout(C))  # a session timeout downgrades as well
    assert type(fenced) is Group and fenced.generation == upgraded.epoch


@pytest.mark.spec("M7")
def test_a_restarted_static_member_on_the_consumer_protocol_takes_its_instance_id_over_from_the_classic_one():
    group = classic_group(static=True)
    restarted = member_id(0, KIP848_IDS | 2)
    join = ConsumerGroupHeartbeat(restarted, 0, instance_id(0), topics=-1, owned=0)
    after, responses = step(group, connection(0, 2), join)
    assert responses[-1].error == Error.NONE and find(after, A1) is None
    m = find(after, restarted)
    assert not m.classic and m.instance_id == instance_id(0)
    unreleased = GroupConfig(topics=(("t", 2),), protocol="consumer", assignor="uniform", migration=2,
                             mutations=frozenset({"classic-instance-unreleased"}))  # KAFKA-17228
    after, responses = step(group, connection(0, 2), join, unreleased)
    assert after == group and responses[-1].error == Error.UNRELEASED_INSTANCE_ID


def test_the_offline_configuration_holds_and_reaches_the_migrations_covers():
    settings = resolve(load_toml(EXAMPLES / "kip848" / "migration_offline.toml"))
    system = settings.system()
    result = explore(system, applicable(system), covers=applicable_covers(system))
    assert set(result.statuses.values()) == {"holds"}
    reached = {name for name, hit in result.covers.items() if hit}
    assert {"online_upgrade", "offline_upgrade", "online_downgrade", "classic_member_told_to_rejoin"} <= reached
