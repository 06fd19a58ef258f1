"""The declarative specification: an abstract state of the group and, for every
action, its pre-condition and post-condition over (state, next state) —
the contract the model's handlers must meet (spec/SPEC.md, section 8).

Nothing here calls the model's handlers. Every condition is written once, as a
Python function of a *logic* and abstract states, so the same text is

* evaluated on concrete states (``PYTHON``: ints and bools) by the checker's
  refinement check (checker/refinement.py), on every explored transition, and
* encoded for z3 (``Z3``: bit-vectors, integers, booleans) by ``rebalance
  prove`` (checker/prove.py), which proves the inductive invariant ``INVARIANT``
  over these actions.

The abstract state (``View``) keeps, per client slot ``i``, what ownership and
fencing depend on, and forgets the rest (messages other than grants, leaders,
timers, the subscriptions' other fields):

* ``live[i]``: a process runs (or is paused) on slot i;
* ``known[i]``: its member id is a member of the group at the coordinator;
* ``member_generation[i]``: the generation it believes it is in (-1: none);
* ``owned[i]``: the partitions it owns (a bitmask);
* ``stable[i]``: the member's phase is Stable, the only one it commits in (R41;
  ``AbstractCoordinator.generationIfStable``);
* ``assigned[i]``: the assignment the coordinator stores for the slot's newest member
  id (an older one is a crashed process's, awaiting its session timeout: nothing
  is granted from it);
* ``claim[i]``, ``claim_generation[i]``: the subscription the coordinator records
  for that member id: the partitions it claims and their generation (R13, KIP-792;
  0 and -1 without one);
* ``granting[i]``, ``grant[i]``, ``grant_generation[i]``: a SyncGroup response
  without error is in flight to it, carrying the partitions ``grant[i]``, answering
  a SyncGroup of generation ``grant_generation[i]`` (-1 without one);
* ``phase``, ``generation``: the coordinator's group state and generation.

Partitions are bitmasks: ``&`` and ``|`` mean the same on Python ints and on z3
bit-vectors; comparisons go through the logic's ``And``, ``Or``, ``Not``,
``Implies`` and ``If``.
"""
from __future__ import annotations

from typing import Callable, NamedTuple

from rebalance.model.protocol import NO_GENERATION, Phase

EMPTY, PREPARING, COMPLETING, STABLE, DEAD = (int(p) for p in Phase)


class View(NamedTuple):
    """The abstract state; the per-slot fields are tuples indexed by client slot."""

    phase: object
    generation: object
    live: tuple
    known: tuple
    member_generation: tuple
    owned: tuple
    assigned: tuple
    granting: tuple
    grant: tuple
    stable: tuple
    grant_generation: tuple
    claim: tuple
    claim_generation: tuple


SLOT_FIELDS = ("live", "known", "member_generation", "owned", "assigned", "granting", "grant", "stable",
               "grant_generation", "claim", "claim_generation")
CONSUMER_FIELDS = ("live", "member_generation", "owned", "stable")
GROUP_SLOT_FIELDS = ("assigned", "claim", "claim_generation")  # the coordinator's, per slot


class PythonLogic:
    """Conditions on concrete values: Python ints and bools."""

    @staticmethod
    def And(*xs):
        return all(xs)

    @staticmethod
    def Or(*xs):
        return any(xs)

    @staticmethod
    def Not(x):
        return not x

    @staticmethod
    def Implies(a, b):
        return (not a) or bool(b)

    @staticmethod
    def If(c, a, b):
        return a if c else b


PYTHON = PythonLogic()


def z3_logic():
    """The z3 logic (z3 is imported only when asked for)."""
    import z3

    class Z3Logic:
        And, Or, Not, Implies, If = (staticmethod(f) for f in (z3.And, z3.Or, z3.Not, z3.Implies, z3.If))

    return Z3Logic()


# --- spec mutations: a deliberately wrong contract, to see refinement fail -----

SPEC_MUTATIONS = {
    "late-sync-grants-nothing": "the SyncGroup action says a late SyncGroup in Stable is answered with an "
                                "empty assignment (the model returns the stored one, R8)",
    "barrier-never-completes": "the membership actions (JoinGroup, LeaveGroup, the timers) never complete the "
                               "JoinGroup barrier: the generation stays (the model's do complete it, R4)",
    "granted-keeps-revoked": "the SyncGroupResponse action lets a member keep what its grant revokes: it owns "
                             "at least the grant, not exactly it (the model still meets the weaker contract; "
                             "the induction of `prove` fails: a Stable member of the current generation then "
                             "owns what another member is granted)",
}


# --- building blocks ------------------------------------------------------------

def slots(s: View) -> range:
    return range(len(s.live))


def settled(L, s: View, i: int):
    """Slot i's member is Stable in the current generation under a known member id:
    it consumed that generation's grant (R8, R18)."""
    return L.And(s.stable[i], s.known[i], s.member_generation[i] == s.generation)


def holding(L, s: View, i: int):
    """What slot i holds of the current generation: what it owns once settled in it,
    what a grant of it carries to it, and in Stable its stored assignment. Only the
    current generation counts: older grants and owners are fenced (R9, R41)."""
    return L.If(settled(L, s, i), s.owned[i], 0) | \
        L.If(L.And(s.granting[i], s.grant_generation[i] == s.generation), s.grant[i], 0) | \
        L.If(s.phase == STABLE, s.assigned[i], 0)


def rights(L, s: View, i: int):
    """Whether slot i can commit (R41, R9): its member settled in the current
    generation (a member commits only while Stable; its OffsetCommit is accepted
    from a known member id of the current generation), the group Stable or
    PreparingRebalance."""
    return L.And(settled(L, s, i), L.Or(s.phase == STABLE, s.phase == PREPARING))


def _same(s: View, t: View, field: str, i: int):
    return getattr(t, field)[i] == getattr(s, field)[i]


def _slot_unchanged(L, s: View, t: View, i: int):
    return L.And(*(_same(s, t, f, i) for f in SLOT_FIELDS))


def _group_unchanged(L, s: View, t: View):
    return L.And(t.phase == s.phase, t.generation == s.generation,
                 *(_same(s, t, f, j) for f in GROUP_SLOT_FIELDS for j in slots(s)))


def _others_unchanged(L, s: View, t: View, i: int):
    return L.And(*(_slot_unchanged(L, s, t, j) for j in slots(s) if j != i))


def _grants_unchanged(L, s: View, t: View, j: int):
    return L.And(t.granting[j] == s.granting[j], t.grant[j] == s.grant[j], _same(s, t, "grant_generation", j))


def _no_grant(L, t: View, j: int):
    return L.And(L.Not(t.granting[j]), t.grant[j] == 0, t.grant_generation[j] == NO_GENERATION)


def _stable_only_lost(L, s: View, t: View, j: int):
    return L.Implies(t.stable[j], s.stable[j])


def _consumers_unchanged(L, s: View, t: View):
    """The coordinator's actions touch no consumer; they can only forget member ids."""
    return L.And(*(L.And(*(_same(s, t, f, j) for f in CONSUMER_FIELDS),
                         L.Implies(t.known[j], s.known[j])) for j in slots(s)))


def _member_frame(L, s: View, t: View, i: int):
    """A member's own step: the coordinator and the other slots are unchanged."""
    return L.And(_group_unchanged(L, s, t), _others_unchanged(L, s, t, i))


# --- the cases: each a pre-condition on s and a post-condition on (s, t) ----------
# pre(L, s, i) and post(L, s, t, i) yield (clause, condition) pairs; ``i`` is the
# acting client slot (unused by the coordinator's timers).


def _no_pre(L, s, i, muts):
    """No pre-condition. (The member cases without one, taken by a slot without a
    process, where everything is zero, change nothing, and a stutter is never
    forbidden: a pre-condition there would be a dead clause.)"""
    return ()


def _stutter_post(L, s, t, i, muts):
    yield "nothing abstract changes", L.And(_group_unchanged(L, s, t), *(_slot_unchanged(L, s, t, j) for j in slots(s)))


def _membership_post(L, s, t, i, muts):
    """R2-R7, R11, R12, R25-R27, R30: the coordinator admits, replaces or removes
    members, starts a rebalance or completes the JoinGroup barrier; no grant is sent."""
    yield "consumers unchanged, member ids only forgotten", _consumers_unchanged(L, s, t)
    yield "no grant sent", L.And(*(_grants_unchanged(L, s, t, j) for j in slots(s)))
    yield "only the leader's SyncGroup makes a group Stable", L.Implies(t.phase == STABLE, s.phase == STABLE)
    yield "no membership action makes a group Dead", L.Implies(t.phase == DEAD, s.phase == DEAD)
    completes = t.generation == s.generation + 1
    if "barrier-never-completes" in muts:
        yield "generation unchanged", t.generation == s.generation
    else:
        yield "generation unchanged or the barrier completes", L.Or(t.generation == s.generation, completes)
    yield "a completed barrier leads to CompletingRebalance or Empty", L.Implies(
        completes, L.Or(t.phase == COMPLETING, t.phase == EMPTY))
    yield "CompletingRebalance is entered only by completing the barrier", L.Implies(
        L.And(t.phase == COMPLETING, s.phase != COMPLETING), completes)
    # a slot's stored assignment is its newest member id's: once that one is removed outside Stable (R3 keeps
    # the stored assignments there), an older one of a dead process (R11) may show the one it was given
    yield "stored assignments kept or cleared", L.And(*(L.Or(t.assigned[j] == s.assigned[j], t.assigned[j] == 0,
                                                             L.And(L.Not(t.known[j]), t.phase != STABLE))
                                                        for j in slots(s)))
    yield "a rebalance interrupting CompletingRebalance clears the stored assignments (R3)", L.Implies(
        L.And(s.phase == COMPLETING, t.phase == PREPARING), L.And(*(t.assigned[j] == 0 for j in slots(s))))


def _install_pre(L, s, i, muts):
    yield "CompletingRebalance", s.phase == COMPLETING


def _install_post(L, s, t, i, muts):
    """R8, R16, R22, R23: the leader's SyncGroup stores the assignment, makes the
    group Stable and answers the held SyncGroups with it, of this generation. The
    assignment gives no partition twice and, to no member, a partition another
    member's recorded subscription claims, unless its own claim of it is newer:
    what the leader knows is the subscriptions, not what members own now (a
    paused static member kept by the rebalance timeout owns more than it claimed,
    F2)."""
    yield "Stable, same generation", L.And(t.phase == STABLE, t.generation == s.generation)
    yield "consumers, member ids and subscriptions unchanged", L.And(*(L.And(
        *(_same(s, t, f, j) for f in CONSUMER_FIELDS + ("known", "claim", "claim_generation"))) for j in slots(s)))
    yield "each slot keeps its grant or, known, is granted its assignment of this generation", L.And(*(
        L.Or(_grants_unchanged(L, s, t, j),
             L.And(s.known[j], t.granting[j], L.Not(s.granting[j]), t.grant[j] == t.assigned[j],
                   t.grant_generation[j] == s.generation)) for j in slots(s)))
    pairs = [(j, k) for j in slots(s) for k in slots(s) if j != k]
    yield "no partition assigned twice", L.And(*((t.assigned[j] & t.assigned[k]) == 0 for j, k in pairs if j < k))
    yield "nothing assigned that another member claims, unless the receiver's claim is newer (R22, R23)", L.And(*(
        (t.assigned[j] & s.claim[k] & ~L.If(s.claim_generation[j] > s.claim_generation[k], s.claim[j], 0)) == 0
        for j, k in pairs))


def _late_sync_pre(L, s, i, muts):
    yield "Stable", s.phase == STABLE
    yield "the member is known", s.known[i]


def _late_sync_post(L, s, t, i, muts):
    """R8: a SyncGroup in Stable is answered with the stored assignment."""
    yield "group unchanged", _group_unchanged(L, s, t)
    yield "other slots unchanged", _others_unchanged(L, s, t, i)
    yield "own consumer unchanged", L.And(*(_same(s, t, f, i) for f in CONSUMER_FIELDS + ("known",)))
    granted = 0 if "late-sync-grants-nothing" in muts else s.assigned[i]
    yield "granted the stored assignment", L.And(t.granting[i], t.grant[i] == granted,
                                                 t.grant_generation[i] == s.generation)


def _joined_pre(L, s, i, muts):
    yield "a process on the slot", s.live[i]
    yield "no grant in flight: the SyncGroup a grant answers follows the JoinGroup response", L.Not(s.granting[i])


def _joined_post(L, s, t, i, muts):
    """R6, R13, R16: a JoinGroup response: the member takes the generation (at most
    the group's), syncs (not Stable) and keeps what it owns (an eager member
    revoked it before joining, R14); a member id it learns is known only if it
    owns nothing and is being granted nothing."""
    yield "others and the group unchanged", _member_frame(L, s, t, i)
    yield "not Stable: it syncs", L.Not(t.stable[i])
    yield "owned and grants unchanged", L.And(_same(s, t, "owned", i), _same(s, t, "live", i),
                                             _grants_unchanged(L, s, t, i))
    yield "generation at most the group's", L.And(t.member_generation[i] <= s.generation,
                                                 t.member_generation[i] >= NO_GENERATION)
    yield "a newly known member owns nothing and is granted nothing", L.Implies(
        t.known[i], L.Or(s.known[i], L.And(s.owned[i] == 0, L.Not(s.granting[i]))))


def _refused_post(L, s, t, i, muts):
    """R14, R15, R17, R19, R28: an error or a stale response: the member keeps what it
    owns or loses (or revokes) all of it, keeps or drops its generation, may
    forget its member id, and rejoins (it is no longer Stable) or stays as it was."""
    yield "others and the group unchanged", _member_frame(L, s, t, i)
    yield "Stable only lost", _stable_only_lost(L, s, t, i)
    yield "owned kept or dropped", L.And(L.Or(_same(s, t, "owned", i), t.owned[i] == 0), _same(s, t, "live", i))
    yield "generation kept or dropped", L.Or(_same(s, t, "member_generation", i),
                                            t.member_generation[i] == NO_GENERATION)
    yield "member id kept or forgotten", L.Implies(t.known[i], s.known[i])
    yield "grants unchanged", _grants_unchanged(L, s, t, i)


def _granted_post(L, s, t, i, muts):
    """R18: the member owns exactly what it is granted (revoking owned − assigned,
    starting assigned − owned). There is no "ignores it": a grant answers the
    member's own SyncGroup on its own connection, a member sends nothing else
    until that is answered (it stays syncing), and leaving or crashing closes the
    connection, so the grant is dropped (checker/system.py, System.route). The
    member may be Stable after it, or rejoin at once (R18: it revoked something;
    R62, R74).

    Pre-condition: a grant in flight. (Without it, from a slot with no grant, the
    case would let a member turn Stable on nothing, which no other case allows.)"""
    yield "others and the group unchanged", _member_frame(L, s, t, i)
    yield "grant consumed", _no_grant(L, t, i)
    if "granted-keeps-revoked" in muts:
        yield "owns at least the grant", (t.owned[i] & s.grant[i]) == s.grant[i]
    else:
        yield "owns exactly the grant (R18)", t.owned[i] == s.grant[i]
    yield "generation and member id unchanged", L.And(_same(s, t, "member_generation", i), _same(s, t, "known", i),
                                                     _same(s, t, "live", i))


def _granted_pre(L, s, i, muts):
    yield "a grant in flight", s.granting[i]


def _start_pre(L, s, i, muts):
    yield "no process on the slot", L.Not(s.live[i])


def _start_post(L, s, t, i, muts):
    """A process starts (join, restart): a new connection, no member id, nothing owned."""
    yield "others and the group unchanged", _member_frame(L, s, t, i)
    yield "a fresh consumer", L.And(t.live[i], L.Not(t.known[i]), t.owned[i] == 0, L.Not(t.stable[i]),
                                    t.member_generation[i] == NO_GENERATION, _no_grant(L, t, i))


def _live_pre(L, s, i, muts):
    yield "a process on the slot", s.live[i]


def _stop_post(L, s, t, i, muts):
    """R20, and crashes: the process is gone with everything it owned; replies to it
    are dropped."""
    yield "others and the group unchanged", _member_frame(L, s, t, i)
    yield "nothing left", L.And(L.Not(t.live[i]), L.Not(t.known[i]), t.owned[i] == 0, L.Not(t.stable[i]),
                                t.member_generation[i] == NO_GENERATION, _no_grant(L, t, i))


def _rejoins_post(L, s, t, i, muts):
    """R19, R32, R53, R55: the member rejoins of its own accord (its ScheduledRebalanceTimeout
    passed, it was marked leaving, a learner became ready): it sends JoinGroup and is no longer Stable;
    nothing else changes. (No pre-condition: from a slot where it stays as it was,
    the case admits a stutter.)"""
    yield "others and the group unchanged", _member_frame(L, s, t, i)
    yield "its slot unchanged but its phase", L.And(*(_same(s, t, f, i) for f in SLOT_FIELDS if f != "stable"))
    yield "Stable only lost", _stable_only_lost(L, s, t, i)


def _subscribed_post(L, s, t, i, muts):
    """R63: a member subscribes to another topic list: it revokes what it owns of the
    topics it dropped and rejoins; nothing else changes. (No pre-condition, as
    ``_no_pre`` says: from a slot without a process the case admits only a stutter.)"""
    yield "others and the group unchanged", _member_frame(L, s, t, i)
    yield "owned only shrinks", (t.owned[i] & ~s.owned[i]) == 0
    yield "generation, member id and grants unchanged", L.And(
        _same(s, t, "member_generation", i), _same(s, t, "known", i), _same(s, t, "live", i),
        _grants_unchanged(L, s, t, i))
    yield "Stable only lost", _stable_only_lost(L, s, t, i)


def _topic_created_post(L, s, t, i, muts):
    """R62: a topic is created: every running member's metadata shows it; a leader
    waiting for it rejoins (an eager one revoking what it owns, R14)."""
    yield "group unchanged", _group_unchanged(L, s, t)
    yield "each member keeps or revokes all it owns", L.And(*(L.Or(_same(s, t, "owned", j), t.owned[j] == 0)
                                                             for j in slots(s)))
    yield "generations, member ids and grants unchanged", L.And(*(L.And(
        _same(s, t, "member_generation", j), _same(s, t, "known", j), _same(s, t, "live", j),
        _grants_unchanged(L, s, t, j)) for j in slots(s)))
    yield "Stable only lost", L.And(*(_stable_only_lost(L, s, t, j) for j in slots(s)))
def _failover_post(L, s, t, i, muts):
    """R72: the coordinator resumes from its stored record: a Stable or Empty group,
    every grant in flight lost; the members keep what they own and may forget the
    generation of a round that did not complete; the record gives no partition twice,
    nor one another known member owns (it was stored when the leader's assignment
    arrived, and members own only what an assignment since stored gave them)."""
    yield "Stable or Empty", L.Or(t.phase == STABLE, t.phase == EMPTY)
    yield "a stored generation (not negative)", t.generation >= 0
    yield "every grant lost", L.And(*(_no_grant(L, t, j) for j in slots(s)))
    yield "processes and what they own unchanged", L.And(*(L.And(_same(s, t, "live", j), _same(s, t, "owned", j),
                                                                 _same(s, t, "stable", j)) for j in slots(s)))
    yield "generation kept or forgotten", L.And(*(L.Or(_same(s, t, "member_generation", j),
                                                       t.member_generation[j] == NO_GENERATION) for j in slots(s)))
    yield "a slot without a process is no member", L.And(*(L.Implies(L.Not(t.live[j]), L.Not(t.known[j]))
                                                           for j in slots(s)))
    yield "no member's generation beyond the record's", L.And(*(t.member_generation[j] <= t.generation
                                                               for j in slots(s)))
    yield "the record holds no partition twice", L.And(*(
        (holding(L, t, j) & holding(L, t, k)) == 0 for j in slots(s) for k in slots(s) if j < k))


class Case(NamedTuple):
    name: str
    pre: Callable   # (logic, View, slot, spec mutations) -> iterable of (clause, condition)
    post: Callable  # (logic, View, View, slot, spec mutations) -> iterable of (clause, condition)


STUTTER = Case("no abstract change", _no_pre, _stutter_post)
MEMBERSHIP = Case("membership change", _no_pre, _membership_post)
INSTALL = Case("the leader's assignment is installed", _install_pre, _install_post)
LATE_SYNC = Case("SyncGroup in Stable", _late_sync_pre, _late_sync_post)
JOINED = Case("joined", _joined_pre, _joined_post)
REFUSED = Case("refused or stale", _no_pre, _refused_post)
GRANTED = Case("granted", _granted_pre, _granted_post)
START = Case("process starts", _start_pre, _start_post)
STOP = Case("process stops", _no_pre, _stop_post)
BOUNCED = Case("process bounced onto a new assignor list", _live_pre, _start_post)  # R79
SUBSCRIBED = Case("subscription changed", _no_pre, _subscribed_post)
REJOINS = Case("rejoins", _no_pre, _rejoins_post)
TOPIC_CREATED = Case("topic created", _no_pre, _topic_created_post)
FAILOVER = Case("the coordinator fails over", _no_pre, _failover_post)

class SpecAction(NamedTuple):
    """An action: the disjunction of its cases. ``local``: its cases read only the
    acting slot, the group's fields and whether everything else is unchanged (a
    member's own step), so the refinement check may cache its verdict by those."""

    cases: tuple
    local: bool


def _coordinator(*cases) -> SpecAction:
    return SpecAction(cases, False)


def _member(*cases) -> SpecAction:
    return SpecAction(cases, True)


ACTIONS = {
    # the coordinator receives a request
    "JoinGroup": _coordinator(MEMBERSHIP),
    "SyncGroup": _coordinator(INSTALL, LATE_SYNC, STUTTER),
    "Heartbeat": _coordinator(STUTTER),
    "LeaveGroup": _coordinator(MEMBERSHIP),
    "OffsetCommit": _coordinator(STUTTER),
    # the coordinator's timers
    "SessionTimeout": _coordinator(MEMBERSHIP),
    "RebalanceTimeout": _coordinator(MEMBERSHIP),
    "SyncTimeout": _coordinator(MEMBERSHIP),
    "InitialRebalanceDelay": _coordinator(MEMBERSHIP),
    # the clock: members' ScheduledRebalanceTimeouts count down (nothing the View sees)
    "Tick": _coordinator(STUTTER),
    # a member handles a response or acts on its own
    "JoinGroupResponse": _member(JOINED, REFUSED),
    "SyncGroupResponse": _member(GRANTED, REFUSED),
    "HeartbeatResponse": _member(REFUSED),
    "LeaveGroupResponse": _member(STUTTER),
    "OffsetCommitResponse": _member(STUTTER),
    "SendHeartbeat": _member(STUTTER),
    "SendCommit": _member(STUTTER),
    "ScheduledRebalance": _member(REJOINS),
    # Streams (seed 001): a learner becomes ready (R55) and a leaving member shuts down (R54)
    "LearnerReady": _member(REJOINS),  # it may rejoin at once (R55)
    "Shutdown": _member(STOP),
    # the environment
    "Join": _member(START),
    "Restart": _member(START),
    "Leave": _member(STOP),
    "Crash": _member(STOP),
    "Pause": _member(STUTTER),
    "Resume": _member(STUTTER),
    "ScaleDown": _member(REJOINS),  # Streams: the scale-down tool marks a member leaving soon (R53)
    # a rolling upgrade (R79): a running process is bounced onto the next assignor list (its LeaveGroup and
    # JoinGroup in flight), or a slot without one gets the list for its next start (nothing the View sees)
    "Upgrade": _member(BOUNCED, STUTTER),
    "Subscribe": _member(SUBSCRIBED),  # R63
    "CreateTopic": _coordinator(TOPIC_CREATED),  # R62
    "Failover": _coordinator(FAILOVER),  # KIP-345's faults (R72); an admin removal is a LeaveGroup (R71)
}


# --- clause mutations: every clause of every action, negated or dropped ------------

class Clause(NamedTuple):
    """One clause of a spec action: ``kind`` "pre" or "post" of case ``case``."""

    action: str
    case: str
    kind: str
    clause: str

    def mutation(self, op: str) -> str:
        """The spec mutation ``op`` ("negate" or "drop") of this clause, a name
        ``op:action:case:clause`` that ``evaluate`` and ``encode`` accept among
        their spec mutations: the clause's condition replaced by its negation, or
        left out, in this action only."""
        return f"{op}:{self.action}:{self.case}:{self.clause}"


def clauses(name: str | None = None) -> list:
    """Every clause (``Clause``) of spec action ``name`` (None: of every action), in
    order; clause names are unique within a case and contain no ':'."""
    zero = View(EMPTY, 0, (False,) * 2, (False,) * 2, (NO_GENERATION,) * 2, (0,) * 2, (0,) * 2, (False,) * 2,
                (0,) * 2, (False,) * 2, (NO_GENERATION,) * 2, (0,) * 2, (NO_GENERATION,) * 2)
    out = []
    for action in ([name] if name else ACTIONS):
        for case in ACTIONS[action].cases:
            for kind, pairs in (("pre", case.pre(PYTHON, zero, 0, frozenset())),
                                ("post", case.post(PYTHON, zero, zero, 0, frozenset()))):
                out.extend(Clause(action, case.name, kind, c) for c, _ in pairs)
    return out


def _conditions(L, pairs, name: str, case: "Case", kind: str, muts):
    """``pairs`` ((clause, condition), ...) with this action's clause mutations applied
    (``pairs`` itself without any)."""
    return _mutated(L, pairs, name, case, kind, muts) if muts else pairs


def _mutated(L, pairs, name: str, case: "Case", kind: str, muts):
    for clause, condition in pairs:
        c = Clause(name, case.name, kind, clause)
        if c.mutation("drop") in muts:
            continue
        yield clause, (L.Not(condition) if c.mutation("negate") in muts else condition)


def reads_claims(name: str) -> bool:
    """Whether spec action ``name`` reads the recorded claims (``claim``,
    ``claim_generation``), even as "unchanged": every case but the membership change
    and the failover does. The refinement check keys the verdicts of the others,
    and Inv (which reads none either), by views without them. Raises KeyError for
    an unknown name."""
    return any(case not in (MEMBERSHIP, FAILOVER) for case in ACTIONS[name].cases)


def admits_stutters(name: str, muts=frozenset()) -> bool:
    """Whether spec action ``name`` holds on every step that changes nothing abstract
    (``s == t``), read off its cases: it has the ``STUTTER`` case, which has no
    pre-condition and whose one post-condition is exactly that, and no clause
    mutation is on (one could negate it). ``evaluate`` returns None on such a step
    at the latest when it reaches that case. Raises KeyError for an unknown name."""
    return STUTTER in ACTIONS[name].cases and not muts


def evaluate(name: str, s: View, t: View, slot: int, muts=frozenset()) -> str | None:
    """Check one concrete step against spec action ``name``: None if some case's
    pre-condition and post-condition hold, else why not (for the case whose
    pre-condition held, or the first case, the first failing clause).
    Raises KeyError for an unknown action name."""
    enabled, disabled = [], []
    for case in ACTIONS[name].cases:
        pre = _conditions(PYTHON, case.pre(PYTHON, s, slot, muts), name, case, "pre", muts)
        bad = next((c for c, ok in pre if not ok), None)
        if bad is not None:
            disabled.append(f"{case.name}: pre-condition '{bad}' fails")
            continue
        post = _conditions(PYTHON, case.post(PYTHON, s, t, slot, muts), name, case, "post", muts)
        bad = next((c for c, ok in post if not ok), None)
        if bad is None:
            return None
        enabled.append(f"{case.name}: post-condition '{bad}' fails")
    return (enabled + disabled)[0]


def encode(L, name: str, s: View, t: View, slot: int, muts=frozenset()):
    """Spec action ``name`` for ``slot`` as one formula of logic ``L``."""
    return L.Or(*(L.And(*(c for _, c in _conditions(L, case.pre(L, s, slot, muts), name, case, "pre", muts)),
                        *(c for _, c in _conditions(L, case.post(L, s, t, slot, muts), name, case, "post", muts)))
                  for case in ACTIONS[name].cases))


# --- the initial condition and the inductive invariant (SPEC.md section 8) -------

def initial(L, s: View):
    """Init: a group Empty or Stable, no grant in flight, each known member Stable in
    the group's generation owning exactly its stored assignment, the others owning
    nothing, assignments disjoint."""
    n = len(s.live)
    return L.And(L.Or(s.phase == EMPTY, s.phase == STABLE), s.generation >= 0, *(L.And(
        well_formed(L, s, i), L.Not(s.granting[i]),
        L.If(s.known[i], L.And(s.owned[i] == s.assigned[i], s.member_generation[i] == s.generation),
             L.And(s.owned[i] == 0, s.assigned[i] == 0))) for i in range(n)),
        *((s.assigned[i] & s.assigned[j]) == 0 for i in range(n) for j in range(i + 1, n)))


def well_formed(L, s: View, i: int):
    """The slot-local conjuncts of the invariant: a slot without a process has no
    member id, owns nothing, is not Stable and is granted nothing; without a grant
    its partitions are zero and its generation -1; a grant answers a SyncGroup of
    the member's generation or, had a refused Heartbeat reset it since, a later
    one, never beyond the group's; a member's generation is at most the group's."""
    return L.And(L.Implies(L.Not(s.live[i]), L.And(L.Not(s.known[i]), s.owned[i] == 0, L.Not(s.stable[i]),
                                                   L.Not(s.granting[i]))),
                 L.Implies(L.Not(s.granting[i]), L.And(s.grant[i] == 0, s.grant_generation[i] == NO_GENERATION)),
                 L.Implies(s.granting[i], L.And(s.member_generation[i] <= s.grant_generation[i],
                                                s.grant_generation[i] <= s.generation)),
                 s.member_generation[i] <= s.generation, s.member_generation[i] >= NO_GENERATION)


def _nothing_of_the_generation_yet(L, s: View, i: int):
    """In CompletingRebalance the generation's assignment is not installed: no member
    is settled in it and no grant of it is in flight."""
    return L.Implies(s.phase == COMPLETING, L.And(L.Not(settled(L, s, i)), L.Not(
        L.And(s.granting[i], s.grant_generation[i] == s.generation))))


INVARIANT_CLAUSES = (
    ("well-formed slots", lambda L, s: L.And(s.generation >= 0, *(well_formed(L, s, i) for i in slots(s)))),
    ("nothing of a completing generation held", lambda L, s: L.And(*(_nothing_of_the_generation_yet(L, s, i)
                                                                    for i in slots(s)))),
    ("disjoint holdings", lambda L, s: L.And(*((holding(L, s, i) & holding(L, s, j)) == 0
                                               for i in slots(s) for j in slots(s) if i < j))),
)


def invariant(L, s: View):
    """Inv, the strengthening of exclusive ownership (SPEC.md section 8)."""
    return L.And(*(f(L, s) for _, f in INVARIANT_CLAUSES))


def invariant_failure(s: View) -> str | None:
    """The first clause of Inv a concrete view breaks, or None."""
    return next((name for name, f in INVARIANT_CLAUSES if not f(PYTHON, s)), None)


def exclusive_ownership(L, s: View):
    """Safety: no partition owned by two slots that can both commit it (R41, R9)."""
    return L.And(*(L.Implies(L.And(rights(L, s, i), rights(L, s, j)), (s.owned[i] & s.owned[j]) == 0)
                   for i in slots(s) for j in slots(s) if i < j))
