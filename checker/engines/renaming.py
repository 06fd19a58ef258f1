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

from rebalance.model.coordinator import Group, MemberMetadata
from rebalance.model.member import Consumer
from rebalance.model.streams import StreamsMemory
from rebalance.model.protocol import (
    NO_MEMBER_ID, Heartbeat, JoinGroup, JoinGroupResponse, LeaveGroup, OffsetCommit, Subscription, SyncGroup,
    connection, epoch_of, member_id, serial_of, slot_of,
)

from ..system import Proc, State


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
    return g._replace(generation=n.gen(g.generation), leader=n.mid(g.leader),
                      members=tuple(_member(m, n) for m in g.members), first_joiner=n.mid(g.first_joiner),
                      issued=tuple((slot, n.serial(slot, k)) for slot, k in g.issued),
                      pending=tuple(n.mid(m) for m in g.pending), record=g.record and _group(g.record, n))


def _proc(slot: int, p: Proc, n: _Names) -> Proc:
    return Proc(p.status, n.epoch(slot, p.epoch), _consumer(p.consumer, n),
                tuple(_message(r, n) for r in p.requests), tuple(_message(r, n) for r in p.responses), p.shared,
                p.committed, p.stage, p.metadata)


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
    intern the same canonical states. ``canonical_ids`` does the same on
    interned ids (checker/engines/interning.py): its caches are keyed by ids,
    the parts' values are never hashed and no State is built."""

    def __init__(self):
        self._names: dict = {}    # part (by value) -> id of its name sets
        self._name_sets: list = []  # id -> (generations, serials, epochs)
        self._name_ids: dict = {}  # name sets -> id
        self._plans: dict = {}    # the name-set ids of a state's parts -> None (canonical) or its renaming
        self._renamings: dict = {}  # the names of a state to rename -> its renaming, shared by all such states
        self._renamed: dict = {}  # (part, plan number) -> the part renamed
        self._group_names: list = []  # group id -> id of its name sets (None: not seen yet)
        self._proc_names: list = []   # per client slot: proc id -> id of its name sets, -1 without a connection
        self._renamed_groups: dict = {}  # plan number << 32 | group id -> the renamed group's id
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

    def canonical_ids(self, raw: tuple, interner) -> tuple:
        """``canonical`` on interned ids: the id tuple (``Interner.ids``) of the
        canonical form of the state ``raw`` stands for, ``raw`` itself when that
        state is canonical already."""
        columns = self._proc_names
        try:
            signature = (self._group_names[raw[0]], *map(list.__getitem__, columns, raw[1:-1]))
        except IndexError:
            signature = (None,)
        plan = self._plans.get(signature, 0)
        if plan == 0:
            signature = self._signature(raw, interner)
            plan = self._plan_of(signature)
        if plan is None:
            return raw
        renaming, names = plan
        base = renaming << 32  # ids below 2**32
        gid = self._renamed_groups.get(base | raw[0])
        if gid is None:
            gid = self._renamed_groups[base | raw[0]] = interner.group_id(_group(interner.groups[raw[0]], names))
        out = [gid]
        for slot, (column, pid) in enumerate(zip(self._renamed_procs, raw[1:-1])):
            hit = column.get(base | pid)
            if hit is None:
                p = interner.procs[pid]
                hit = column[base | pid] = interner.proc_id(_proc(slot, p, names)) if p.epoch else pid
            out.append(hit)
        out.append(raw[-1])
        return tuple(out)

    def _signature(self, raw: tuple, interner) -> tuple:
        """The name-set ids of ``raw``'s parts, each computed once (``canonical_ids``'s slow path)."""
        groups, columns = self._group_names, self._proc_names
        while len(columns) < len(raw) - 2:
            columns.append([])
            self._renamed_procs.append({})
        for table, top in ((groups, len(interner.groups)), *[(c, len(interner.procs)) for c in columns]):
            table.extend([None] * (top - len(table)))
        if groups[raw[0]] is None:
            groups[raw[0]] = self._names_of(_group, interner.groups[raw[0]])
        for slot, pid in enumerate(raw[1:-1]):
            if columns[slot][pid] is None:
                p = interner.procs[pid]
                columns[slot][pid] = self._names_of(_slot_proc, (slot, p)) if p.epoch else -1
        return (groups[raw[0]], *[column[pid] for column, pid in zip(columns, raw[1:-1])])

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
        return plan


def _slot_proc(slot_proc: tuple, n: _Names) -> Proc:
    slot, p = slot_proc
    return _proc(slot, p, n)
