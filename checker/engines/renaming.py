"""States up to renaming: generations, member ids and connection epochs renamed
in order, so that two states that differ only in how far those counters have
run compare equal.

The handlers use these values only through equality, order and "one more than
the largest" (a new generation, the next member id of a client, the next
process epoch), so an order-preserving renaming maps executions to executions.
That makes a path from ``s`` to a state with ``shape(s)`` the loop of an
infinite execution (a *lasso up to renaming*), although every explored path is
finite: how a bounded exploration shows that leader churn can go on forever
(``bounded_deferral``, checker/engines/churn.py).

``shape(state)`` renames, per kind, the values in use to 1, 2, ... in their
order: generations (NO_GENERATION and 0 kept), each client slot's member-id
serials (the coordinator's ``issued`` counter included) and each slot's process
epochs (0, no process yet, kept); ``faults_left`` becomes 0 (the environment of
a lasso is unbounded). The result is a State of the same types.
"""
from __future__ import annotations

import numpy as np

from rebalance.model.consumer_group.group import ConsumerGroup, ConsumerGroupMember
from rebalance.model.consumer_group.membership import Membership
from rebalance.model.consumer_group.messages import ConsumerGroupHeartbeat, ConsumerGroupHeartbeatResponse
from rebalance.model.coordinator import Group, MemberMetadata
from rebalance.model.member import Consumer
from rebalance.model.streams import StreamsMemory
from rebalance.model.protocol import (
    KIP848_IDS, NO_MEMBER_ID, Heartbeat, JoinGroup, JoinGroupResponse, LeaveGroup, OffsetCommit, Subscription, SyncGroup,
    connection, epoch_of, member_id, serial_of, slot_of,
)

from ..system import Proc, State
from .interning import IntMap, RowMemo, grown

_UNKNOWN = -2  # a name-set table's entry not computed yet


class _Names:
    """The three renamings of one state; first ``collect``, then ``rename``."""

    def __init__(self):
        self.generations: set = set()
        self.serials: set = set()   # (slot, serial)
        self.epochs: set = set()    # (slot, epoch)
        self.renaming = False

    def freeze(self) -> None:
        self.gen_map = {g: i for i, g in enumerate(sorted(self.generations), 1)}
        self.serial_map = _per_slot(self.serials)
        self.epoch_map = _per_slot(self.epochs)
        self.renaming = True

    def gen(self, g: int) -> int:
        if g <= 0:
            return g
        if self.renaming:
            return self.gen_map[g]
        self.generations.add(g)
        return g

    def mid(self, m: int) -> int:
        if m == NO_MEMBER_ID:
            return m
        key = (slot_of(m), serial_of(m))
        if self.renaming:
            return member_id(key[0], self.serial_map[key])
        self.serials.add(key)
        return m

    def serial(self, slot: int, k: int) -> int:
        if self.renaming:
            return self.serial_map[(slot, k)]
        self.serials.add((slot, k))
        return k

    def epoch(self, slot: int, e: int) -> int:
        if e == 0:
            return e
        if self.renaming:
            return self.epoch_map[(slot, e)]
        self.epochs.add((slot, e))
        return e

    def conn(self, c: int) -> int:
        return connection(slot_of(c), self.epoch(slot_of(c), epoch_of(c)))


def _per_slot(pairs: set) -> dict:
    out, last, n = {}, None, 0
    for slot, v in sorted(pairs):
        n = n + 1 if slot == last else 1
        last = slot
        out[(slot, v)] = n
    return out


def _subscription(x, n: _Names):
    if type(x) is not Subscription:
        return x
    echo = (n.gen(x.echo[0]),) + x.echo[1:] if x.echo else x.echo
    return x._replace(generation=n.gen(x.generation), echo=echo)


def _message(x, n: _Names):
    kind = type(x)
    if kind is Heartbeat or kind is OffsetCommit:
        return x._replace(member_id=n.mid(x.member_id), generation=n.gen(x.generation))
    if kind is JoinGroup:
        return x._replace(member_id=n.mid(x.member_id), subscription=_subscription(x.subscription, n))
    if kind is SyncGroup:
        return x._replace(member_id=n.mid(x.member_id), generation=n.gen(x.generation),
                          assignments=tuple((n.mid(m), a) for m, a in x.assignments))
    if kind is LeaveGroup:
        return x._replace(members=tuple((n.mid(m), i) for m, i in x.members))
    if kind is JoinGroupResponse:
        return x._replace(member_id=n.mid(x.member_id), generation=n.gen(x.generation), leader=n.mid(x.leader),
                          members=tuple((n.mid(m), i, _subscription(s, n)) for m, i, s in x.members))
    return x  # SyncGroupResponse, HeartbeatResponse, LeaveGroupResponse, OffsetCommitResponse: no names


def _consumer(c: Consumer | None, n: _Names):
    if c is None:
        return c
    echo = (n.gen(c.echo[0]),) + c.echo[1:] if c.echo else c.echo
    memory = c.memory
    if type(memory) is StreamsMemory:  # the Streams leader remembers member ids (R52)
        memory = StreamsMemory(*(tuple(n.mid(m) for m in ids) for ids in memory))
    return c._replace(member_id=n.mid(c.member_id), generation=n.gen(c.generation),
                      owned_generation=n.gen(c.owned_generation), echo=echo, memory=memory)


def _member(m: MemberMetadata, n: _Names) -> MemberMetadata:
    return m._replace(member_id=n.mid(m.member_id), conn=n.conn(m.conn), subscription=_subscription(m.subscription, n))


def _group(g: Group, n: _Names) -> Group:
    if type(g) is ConsumerGroup:
        return _consumer_group(g, n)
    return g._replace(generation=n.gen(g.generation), leader=n.mid(g.leader),
                      members=tuple(_member(m, n) for m in g.members), first_joiner=n.mid(g.first_joiner),
                      issued=tuple((slot, n.serial(slot, k)) for slot, k in g.issued),
                      pending=tuple(n.mid(m) for m in g.pending), record=g.record and _group(g.record, n))


def _proc(slot: int, p: Proc, n: _Names) -> Proc:
    if type(p.consumer) is Membership:
        return _membership_proc(slot, p, n)
    return Proc(p.status, n.epoch(slot, p.epoch), _consumer(p.consumer, n),
                tuple(_message(r, n) for r in p.requests), tuple(_message(r, n) for r in p.responses), p.shared,
                p.committed, p.stage, p.metadata, p.restored, p.quiet, p.restarting)


def shape(state: State) -> State:
    """``state`` up to renaming, ``faults_left`` 0 (see the module docstring)."""
    return Renamer().canonical(state)._replace(faults_left=0)


def _collected(walk, part) -> tuple:
    names = _Names()
    walk(part, names)
    return frozenset(names.generations), frozenset(names.serials), frozenset(names.epochs)


def _dense(pairs) -> bool:
    """Whether each slot's values in ``pairs`` ((slot, value), ...) are 1..k."""
    top: dict = {}
    count: dict = {}
    for slot, v in pairs:
        if v > top.get(slot, 0):
            top[slot] = v
        count[slot] = count.get(slot, 0) + 1
    return all(top[slot] == count[slot] for slot in top)


class Renamer:
    """``canonical(state)``: ``shape`` with the fault budget kept, memoised per part
    (the coordinator's Group, each slot's Proc), so that exploring up to renaming
    (checker/engines/explore.py) costs little: a state whose names are already 1..k per
    kind is returned as it is, found by a union of the parts' cached name sets;
    only the others are renamed, part by part, each renamed part cached under
    its renaming. Every engine builds one (the Spark executors too), so both
    intern the same canonical states. ``canonical_rows`` does the same on
    interned ids (checker/engines/interning.py), a batch of states at once: its
    caches are keyed by ids, the parts' values are never hashed and no State is
    built."""

    def __init__(self):
        self._names: dict = {}    # part (by value) -> id of its name sets
        self._name_sets: list = []  # id -> (generations, serials, epochs)
        self._name_ids: dict = {}  # name sets -> id
        self._plans: dict = {}    # the name-set ids of a state's parts -> None (canonical) or its renaming
        self._renamings: dict = {}  # the names of a state to rename -> its renaming, shared by all such states
        self._renamed: dict = {}  # (part, plan number) -> the part renamed
        self._plan_names: list = []  # plan number -> its _Names
        # on interned ids (``canonical_rows``): group id -> id of its name sets (_UNKNOWN: not seen yet);
        # per client slot, proc id -> id of its name sets, -1 without a connection
        self._group_names = np.empty(0, np.int64)
        self._proc_names: list = []
        self._plan_numbers = RowMemo()  # a row of name-set ids + 1 -> its plan's number (-1: canonical)
        self._renamed_groups = IntMap()  # plan number << 32 | group id -> the renamed group's id
        self._renamed_procs: list = []   # per client slot: plan number << 32 | proc id -> the renamed proc's id

    def _names_of(self, walk, part) -> int:
        sets = _collected(walk, part)
        hit = self._name_ids.get(sets)
        if hit is None:
            hit = self._name_ids[sets] = len(self._name_sets)
            self._name_sets.append(sets)
        return hit

    def _plan_of(self, signature: tuple):
        plan = self._plans.get(signature, 0)
        if plan == 0:
            plan = self._plans[signature] = self._plan(signature)
        return plan

    def canonical(self, state: State) -> State:
        """``state`` with its generations, member-id serials and epochs renamed to
        1, 2, ... in order (module docstring); ``faults_left`` kept. A state and its
        canonical form have the same behaviour up to that renaming. The very
        ``state`` object is returned when it is canonical already."""
        signature = tuple(map(self._part_names, (state.group, *enumerate(state.procs))))
        plan = self._plan_of(signature)
        if plan is None:
            return state
        renaming, names = plan
        procs = tuple(self._rename((slot, p), renaming, _slot_proc, names) if p.epoch else p
                      for slot, p in enumerate(state.procs))
        return State(self._rename(state.group, renaming, _group, names), procs, state.faults_left)

    def _part_names(self, key) -> int:
        """The name-set id of a part (by value): a Group, or ``(slot, Proc)``."""
        hit = self._names.get(key)
        if hit is None:
            if type(key) is not tuple:
                hit = self._names_of(_group, key)
            else:
                hit = self._names_of(_slot_proc, key) if key[1].epoch else -1  # no connection, no names
            self._names[key] = hit
        return hit

    def _rename(self, part, plan: int, walk, names: _Names):
        key = (part, plan)
        hit = self._renamed.get(key)
        if hit is None:
            hit = self._renamed[key] = walk(part, names)
        return hit

    def canonical_rows(self, rows: np.ndarray, interner) -> np.ndarray:
        """``canonical`` on interned ids, a batch at once: ``rows`` an (n, parts + 1)
        int64 array of id tuples (``Interner.ids``: group id, proc id per client slot,
        faults left); returns a new array, each row standing for a state not yet
        canonical replaced by the ids of its canonical form. A state's plan is found
        by its parts' name-set ids (one table per kind, indexed by interned id), and
        each renamed part by (plan number, id): no value is hashed on a hit."""
        signatures = self._signatures(rows, interner)
        plan = self._plan_numbers.resolve(signatures + 1, len(self._name_sets) + 1, lambda firsts: [
            -1 if plan is None else plan[0] for plan in (self._plan_of(tuple(signatures[i].tolist())) for i in firsts)])
        out = rows.copy()
        todo = (plan >= 0).nonzero()[0]
        if not len(todo):
            return out
        base = plan[todo] << 32  # ids below 2**32
        groups, procs, names = interner.groups, interner.procs, self._plan_names

        def renamed_groups(keys, _):
            return [interner.group_id(_group(groups[k & 0xFFFFFFFF], names[k >> 32])) for k in keys]
        out[todo, 0] = self._renamed_groups.resolve(base | rows[todo, 0], renamed_groups)
        for slot, renamed in enumerate(self._renamed_procs, 1):
            def renamed_procs(keys, _, slot=slot - 1):
                return [interner.proc_id(_proc(slot, p, names[k >> 32])) if p.epoch else k & 0xFFFFFFFF
                        for k in keys for p in (procs[k & 0xFFFFFFFF],)]
            out[todo, slot] = renamed.resolve(base | rows[todo, slot], renamed_procs)
        return out

    def _signatures(self, rows: np.ndarray, interner) -> np.ndarray:
        """The name-set ids of ``rows``' parts (an int64 array of ``rows``' shape but
        for faults left), each part's computed once, when first asked."""
        slots = rows.shape[1] - 2
        while len(self._renamed_procs) < slots:
            self._renamed_procs.append(IntMap())
            self._proc_names.append(np.empty(0, np.int64))
        self._group_names = grown(self._group_names, len(interner.groups), _UNKNOWN)
        tables = [self._group_names]
        for slot in range(slots):
            self._proc_names[slot] = grown(self._proc_names[slot], len(interner.procs), _UNKNOWN)
            tables.append(self._proc_names[slot])
        out = np.empty((len(rows), slots + 1), np.int64)
        for k, table in enumerate(tables):
            column = rows[:, k]
            names = out[:, k] = table[column]
            for i in np.unique(column[names == _UNKNOWN]).tolist():
                if k == 0:
                    table[i] = self._names_of(_group, interner.groups[i])
                else:
                    p = interner.procs[i]
                    table[i] = self._names_of(_slot_proc, (k - 1, p)) if p.epoch else -1  # no connection, no names
            if (names == _UNKNOWN).any():
                out[:, k] = table[column]
        return out

    def _plan(self, signature: tuple):
        """None if the parts with these name sets (ids) make a canonical state, else
        ``(plan number, _Names)`` renaming them: one per distinct set of names, so
        that the states with the same names share their renamed parts (the main
        job's 1,498 signatures to rename have 63 renamings)."""
        gens, serials, epochs = set(), set(), set()
        for k in signature:
            if k >= 0:
                g, s, e = self._name_sets[k]
                gens |= g
                serials |= s
                epochs |= e
        positive = [g for g in gens if g > 0]
        if (not positive or max(positive) == len(positive)) and _dense(serials) and _dense(epochs):
            return None
        key = (frozenset(gens), frozenset(serials), frozenset(epochs))
        plan = self._renamings.get(key)
        if plan is None:
            names = _Names()
            names.generations, names.serials, names.epochs = gens, serials, epochs
            names.freeze()
            plan = self._renamings[key] = len(self._renamings), names  # the plan's number keys the parts it renames
            self._plan_names.append(names)
        return plan


# --- KIP-848: member ids are client-generated, ``member_id(slot, process epoch)``, so they are
# renamed with the slot's process epochs (a new process's id stays fresh); every epoch
# (group, target assignment, member, previous, partition) is renamed as a generation

def _kip848_mid(m: int, n: _Names) -> int:
    """A KIP-848 client's member id, its process epoch renamed (``KIP848_IDS``, the online
    migration's mark of a consumer-protocol id, kept)."""
    if m == NO_MEMBER_ID:
        return m
    k = serial_of(m)
    return member_id(slot_of(m), (k & KIP848_IDS) | n.epoch(slot_of(m), k & ~KIP848_IDS))


def _cg_member(m: ConsumerGroupMember, n: _Names) -> ConsumerGroupMember:
    if m.classic:  # a classic member in a consumer group (online migration): a coordinator-issued id
        conn, sub = m.classic
        return m._replace(member_id=n.mid(m.member_id), epoch=n.gen(m.epoch), previous_epoch=n.gen(m.previous_epoch),
                          classic=(n.conn(conn), _subscription(sub, n)))
    return m._replace(member_id=_kip848_mid(m.member_id, n), epoch=n.gen(m.epoch),
                      previous_epoch=n.gen(m.previous_epoch),
                      assignment_epochs=tuple((p, n.gen(e)) for p, e in m.assignment_epochs))


def _consumer_group(g: ConsumerGroup, n: _Names) -> ConsumerGroup:
    classic = {m.member_id for m in g.members if m.classic}
    return g._replace(epoch=n.gen(g.epoch), target_epoch=n.gen(g.target_epoch),
                      members=tuple(_cg_member(m, n) for m in g.members),
                      target=tuple((n.mid(m) if m in classic else _kip848_mid(m, n), parts) for m, parts in g.target),
                      partition_epochs=tuple(n.gen(e) for e in g.partition_epochs),
                      issued=tuple((slot, n.serial(slot, k)) for slot, k in g.issued))


def _kip848_message(x, n: _Names):
    kind = type(x)
    if kind is ConsumerGroupHeartbeat or kind is ConsumerGroupHeartbeatResponse:
        return x._replace(member_id=_kip848_mid(x.member_id, n), member_epoch=n.gen(x.member_epoch))
    if kind is OffsetCommit:
        return x._replace(member_id=_kip848_mid(x.member_id, n), generation=n.gen(x.generation))
    return x  # OffsetCommitResponse: no names


def _membership_proc(slot: int, p: Proc, n: _Names) -> Proc:
    c = p.consumer
    c = c._replace(member_id=_kip848_mid(c.member_id, n), epoch=n.gen(c.epoch))
    return p._replace(epoch=n.epoch(slot, p.epoch), consumer=c,
                      requests=tuple(_kip848_message(r, n) for r in p.requests),
                      responses=tuple(_kip848_message(r, n) for r in p.responses))


def _slot_proc(slot_proc: tuple, n: _Names) -> Proc:
    slot, p = slot_proc
    return _proc(slot, p, n)
