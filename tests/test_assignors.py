import pytest
from hypothesis import given, settings, strategies as st

from rebalance.model.assignors import assign, contested_claims, resolve_claims
from rebalance.model.config import GroupConfig
from rebalance.model.protocol import EMPTY_SUBSCRIPTION, Subscription, member_id, partitions_of


def loads(result):
    return sorted(bin(a.partitions).count("1") for _, a in result)


def union_exactly_once(result, total):
    seen = 0
    for _, a in result:
        assert not seen & a.partitions, "a partition assigned twice"
        seen |= a.partitions
    return seen == (1 << total) - 1


def test_range_gives_contiguous_ranges_per_topic():
    cfg = GroupConfig(topics=(("t", 5), ("u", 2)), protocol="eager", assignor="range")
    members = tuple((m, 0, EMPTY_SUBSCRIPTION) for m in (1, 257))
    out = dict(assign(cfg, members))
    # t: 0,1,2 -> first, 3,4 -> second; u (5,6): 5 -> first, 6 -> second
    assert partitions_of(out[1].partitions) == (0, 1, 2, 5)
    assert partitions_of(out[257].partitions) == (3, 4, 6)


def test_roundrobin_deals_in_turn():
    cfg = GroupConfig(topics=(("t", 5),), protocol="eager", assignor="roundrobin")
    out = dict(assign(cfg, tuple((m, 0, EMPTY_SUBSCRIPTION) for m in (1, 257))))
    assert partitions_of(out[1].partitions) == (0, 2, 4)
    assert partitions_of(out[257].partitions) == (1, 3)


@pytest.mark.spec("R22")
def test_claims_higher_generation_wins_and_ties_drop():
    cfg = GroupConfig()
    members = ((1, 0, Subscription(0b0011, 5)), (257, 0, Subscription(0b0110, 6)), (513, 0, Subscription(0b1000, 6)),
               (769, 0, Subscription(0b1000, 6)))
    owners = resolve_claims(cfg, members)
    assert owners == {0: 1, 1: 257, 2: 257}  # partition 1: gen 6 beats gen 5; partition 3: tie, dropped


@pytest.mark.spec("R23")
def test_cooperative_withholds_moving_partition_seed_design1():
    # seed 000, Design I, member joins: A(T1,T4) B(T2) C(T3), D joins
    cfg = GroupConfig()
    members = ((1, 0, Subscription(0b1001, 1)), (257, 0, Subscription(0b0010, 1)), (513, 0, Subscription(0b0100, 1)),
               (769, 0, EMPTY_SUBSCRIPTION))
    out = dict(assign(cfg, members))
    assert out[1].partitions == 0b0001 and out[257].partitions == 0b0010 and out[513].partitions == 0b0100
    assert out[769].partitions == 0  # T4 withheld until A has revoked it


# AbstractStickyAssignorTest's claims: C1 owns t-0, t-1 and C2 owns t-0, t-2, both at one generation; C3 new
SAME_GENERATION = ((1, 0, Subscription(0b011, 1)), (257, 0, Subscription(0b101, 1)), (513, 0, EMPTY_SUBSCRIPTION))


@pytest.mark.spec("R22", "R23")
@pytest.mark.parametrize("partitions,first", [(3, 0b010), (4, 0b1010)], ids=["equal", "unequal"])
def test_cooperative_withholds_a_partition_claimed_twice_in_one_generation(partitions, first):
    # CooperativeStickyAssignorTest.testAllConsumersHaveOwnedPartitionInvalidatedWhenClaimedByMultipleConsumers
    # InSameGenerationWith{Equal,Unequal}PartitionsPerConsumer: t-0 is "owned" and goes to nobody until both
    # claimants have revoked it (partitionsWithMultiplePreviousOwners -> partitionsTransferringOwnership)
    cfg = GroupConfig(topics=(("t", partitions),))
    assert contested_claims(cfg, SAME_GENERATION) == 0b1
    out = dict(assign(cfg, SAME_GENERATION))
    assert (out[1].partitions, out[257].partitions, out[513].partitions) == (first, 0b100, 0)
    # the next round: both revoked t-0 (R18), C3 claims nothing; t-0 is nobody's and goes to C3 at once
    after = ((1, 0, Subscription(first, 2)), (257, 0, Subscription(0b100, 2)), (513, 0, EMPTY_SUBSCRIPTION))
    assert dict(assign(cfg, after))[513].partitions == 0b1


@pytest.mark.spec("R22")
@pytest.mark.parametrize("partitions,first", [(3, 0b010), (4, 0b1010)], ids=["equal", "unequal"])
def test_eager_sticky_gives_a_partition_claimed_twice_out_at_once(partitions, first):
    # StickyAssignorTest.testAllConsumersHaveOwnedPartitionInvalidatedWhenClaimedByMultipleConsumers
    # InSameGenerationWith{Equal,Unequal}PartitionsPerConsumer: StickyAssignor has no adjustment, t-0 goes to C3
    cfg = GroupConfig(topics=(("t", partitions),), protocol="eager", assignor="sticky")
    out = dict(assign(cfg, SAME_GENERATION))
    assert (out[1].partitions, out[257].partitions, out[513].partitions) == (first, 0b100, 0b1)


def test_contested_claims_unowned_mutation_gives_it_out_in_the_same_round():
    # the model before issue 15: the cooperative assignor gave t-0 to C3 while C1 and C2 still held it
    cfg = GroupConfig(topics=(("t", 3),), mutations=frozenset({"contested-claims-unowned"}))
    assert contested_claims(cfg, SAME_GENERATION) == 0
    assert dict(assign(cfg, SAME_GENERATION))[513].partitions == 0b1


def test_assign_before_revoke_mutation_hands_it_over_at_once():
    cfg = GroupConfig(mutations=frozenset({"assign-before-revoke"}))
    members = ((1, 0, Subscription(0b1001, 1)), (257, 0, Subscription(0b0010, 1)), (513, 0, Subscription(0b0100, 1)),
               (769, 0, EMPTY_SUBSCRIPTION))
    assert dict(assign(cfg, members))[769].partitions == 0b1000


def test_ignore_owned_generation_mutation_drops_older_claims():
    cfg = GroupConfig(mutations=frozenset({"ignore-owned-generation"}))
    members = ((1, 0, Subscription(0b0001, 4)), (257, 0, Subscription(0b0010, 5)))
    assert resolve_claims(cfg, members) == {1: 257}
    assert resolve_claims(GroupConfig(), members) == {0: 1, 1: 257}


claims = st.lists(st.tuples(st.integers(0, 1023), st.integers(-1, 6)), min_size=1, max_size=5)


@settings(max_examples=300, deadline=None)
@given(claims=claims, partitions=st.integers(1, 10), assignor=st.sampled_from(
    ["range", "roundrobin", "sticky", "cooperative-sticky"]))
def test_every_partition_once_and_balanced(claims, partitions, assignor):
    protocol = "cooperative" if assignor == "cooperative-sticky" else "eager"
    cfg = GroupConfig(topics=(("t", partitions),), protocol=protocol, assignor=assignor)
    mask = (1 << partitions) - 1
    members = tuple((member_id(i + 1, 1), 0, Subscription(o & mask, g) if o & mask else EMPTY_SUBSCRIPTION)
                    for i, (o, g) in enumerate(claims))
    out = assign(cfg, members)
    assert [m for m, _ in out] == [m for m, _, _ in members]
    if assignor != "cooperative-sticky":
        assert union_exactly_once(out, partitions)
        assert loads(out)[-1] - loads(out)[0] <= 1
        return
    union_exactly_once(out, partitions)  # no partition twice, some may be withheld
    owners = resolve_claims(cfg, members)
    given_to = {p: m for m, a in out for p in partitions_of(a.partitions)}
    for p, owner in owners.items():  # never assigned while another member owns it
        assert given_to.get(p, owner) == owner
    contested = contested_claims(cfg, members)
    for p in range(partitions):  # only a partition moving away from its owner, or contested, is withheld (R23)
        assert p in given_to or p in owners or contested >> p & 1, f"t-{p} withheld though nobody claims it"
        assert not (p in given_to and contested >> p & 1), f"contested t-{p} given out"


@pytest.mark.spec("R29")
def test_static_members_are_ordered_by_instance_id():
    # KIP-345's range example: a restarted static member (new member id) keeps its range
    cfg = GroupConfig(topics=(("t", 4),), protocol="eager", assignor="range")
    before = dict(assign(cfg, ((1, 1, EMPTY_SUBSCRIPTION), (257, 2, EMPTY_SUBSCRIPTION))))
    after = dict(assign(cfg, ((2, 1, EMPTY_SUBSCRIPTION), (257, 2, EMPTY_SUBSCRIPTION))))  # A restarted
    assert before[1] == after[2] and before[257] == after[257]
    mixed = dict(assign(cfg, ((1, 0, EMPTY_SUBSCRIPTION), (257, 2, EMPTY_SUBSCRIPTION))))
    assert partitions_of(mixed[257].partitions) == (0, 1)  # static before dynamic


BACKOFF = GroupConfig(protocol="deferred", revoking_backoff_ticks=(1, 3))


def backoff_round(a_owns, b_owns, revoked, successive, scheduled=-1):
    """One Design II round of A (member 1) and B (member 257), both echoing generation
    1 with every partition assigned and nothing deferred: ``(A's, B's, delay, (revoked,
    successive) sent)``."""
    echo = (1, 0b1111, 0, revoked, successive)
    members = ((1, 0, Subscription(a_owns, 1, echo, scheduled)), (257, 0, Subscription(b_owns, 1, echo, scheduled)))
    out = dict(assign(BACKOFF, members))
    assert out[1].scheduled == out[257].scheduled and out[1].echo == out[257].echo
    return out[1].partitions, out[257].partitions, out[1].scheduled, out[1].echo[2:]


@pytest.mark.spec("R40")
def test_a_second_revoking_round_in_a_row_is_held_back_with_a_growing_delay():
    # B came with nothing: the first revoking round revokes at once (t-2, t-3 withheld from B meanwhile)
    assert backoff_round(0b1111, 0, 0, 0) == (0b0011, 0, 0, (1, 0))
    # right after a revoking round: revoke nothing, schedule the first backoff (KAFKA-12495)
    assert backoff_round(0b1111, 0, 1, 0) == (0b1111, 0, 1, (1, 1))
    # while it runs (ticks left), rounds revoke nothing and keep the deadline
    assert backoff_round(0b1111, 0, 1, 1, scheduled=1) == (0b1111, 0, 1, (0, 1))
    # once it has passed, the revocation happens; the count is kept
    assert backoff_round(0b1111, 0, 1, 1, scheduled=0) == (0b0011, 0, 0, (1, 1))
    # the next one in a row waits longer, and the last delay repeats
    assert backoff_round(0b1111, 0, 1, 1) == (0b1111, 0, 3, (1, 2))
    assert backoff_round(0b1111, 0, 1, 2) == (0b1111, 0, 3, (1, 2))
    # a round after a revoking one that revokes nothing starts the count again
    assert backoff_round(0b0011, 0b1100, 1, 2) == (0b0011, 0b1100, 0, (0, 0))


DEFERRED = GroupConfig(protocol="deferred")


def deferred_round(cfg, *claims, echo):
    """One Design II round of members 1, 257, ... claiming ``(owned, generation)``,
    each echoing ``echo``: ``(per member's partitions, ScheduledRebalanceTimeout)``."""
    members = tuple((1 + 256 * i, 0, Subscription(o, g, echo) if o else Subscription(0, -1, echo))
                    for i, (o, g) in enumerate(claims))
    out = assign(cfg, members)
    return tuple(a.partitions for _, a in out), out[0][1].scheduled


@pytest.mark.spec("R22", "R33")
def test_deferred_revokes_duplicates_at_once_and_reassigns_them_next_round():
    # IncrementalCooperativeAssignorTest.testTaskAssignmentWhenTasksDuplicatedInWorkerAssignment: worker1 runs
    # everything, worker2 joins running a duplicate of half of it. The duplicates are revoked from both
    # (duplicatedToRevoke), with no delay; the next round assigns them as new work, no revocations, balanced
    first = deferred_round(DEFERRED, (0b1111, 1), (0b0011, 1), echo=(1, 0b1111, 0, 0, 0))
    assert first == ((0b1100, 0), 0)
    second = deferred_round(DEFERRED, (0b1100, 2), (0, -1), echo=(2, 0b1100, 0, 0, 0))
    assert second == ((0b1100, 0b0011), 0)


def test_contested_claims_unowned_mutation_holds_duplicates_as_lost():
    # the model before issue 15: the duplicates counted as lost and waited a full scheduled delay
    cfg = GroupConfig(protocol="deferred", mutations=frozenset({"contested-claims-unowned"}))
    out, delay = deferred_round(cfg, (0b1111, 1), (0b0011, 1), echo=(1, 0b1111, 0, 0, 0))
    assert delay == cfg.scheduled_delay_ticks and not any(p & 0b0011 for p in out)
