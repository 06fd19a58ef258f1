"""Refinement: every explored step of the model is a step of the declarative
specification (spec/actions.py), and every explored state satisfies the
specification's inductive invariant.

``view(system, state)`` is the abstraction function: it maps a checker state to the
specification's ``View`` (per client slot: process, member id known to the
coordinator, generation, owned partitions, whether it is Stable, stored assignment,
recorded subscription's claims and their generation, grant in flight and its
generation).
``action_name(action)`` names the specification action a transition must be: the
request delivered (``JoinGroup``, ``SyncGroup``, ...), the timer that fired
(``SessionTimeout``, ...), the response a member handled (``JoinGroupResponse``,
...), ``SendHeartbeat``, ``ScheduledRebalance`` or the fault (``Join``, ``Crash``, ...).

The check runs on every transition, so it is memoised: views are built from
per-process and per-group parts cached by value, and a step's verdict is cached
by (action, acting slot, view before, view after), which recur far more often
than the states they abstract. On the engines' interned ids (checker/engines/steps.py)
the check comes in two parts: the step's spec action on every transition, and Inv
once on every state reached (a state reached again was checked the first time).
"""
from __future__ import annotations

import numpy as np

from rebalance.model.member import MemberPhase
from rebalance.model.protocol import Error, SyncGroupResponse, epoch_of, slot_of
from rebalance.spec import actions as spec
from rebalance.spec.actions import View

from .engines.interning import IntMap, RowMemo, _intern, grown
from .system import PAUSED, RUNNING, Action, State, System

_NO_PROCESS = (False, 0, spec.NO_GENERATION, 0, False, 0, False, spec.NO_GENERATION)
_LOCAL_NAMES = {"heartbeat": "SendHeartbeat", "scheduled": "ScheduledRebalance", "commit": "SendCommit",
                "ready": "LearnerReady", "shutdown": "Shutdown", "scale_down": "ScaleDown",
                "create-topic": "CreateTopic", "delete-connector": "CreateTopic",  # R81: the metadata changes, as R62's
                "remove": "LeaveGroup", "downgrade": "Restart"}  # R71: an admin's LeaveGroup; R73: a restart


def action_name(action: Action) -> str:
    """The specification action a transition with label ``action`` must satisfy."""
    kind = action.kind
    if kind in ("deliver", "reply", "timer"):
        return type(action.detail).__name__
    return _LOCAL_NAMES.get(kind) or kind.capitalize()


class Refinement:
    """The refinement check for one system (its caches are the system's)."""

    row_part_bits = 16  # a part id's field in ``step_rows``'s packed keys; past it, steps are keyed by ``_verdict``

    def __init__(self, system: System):
        self.system = system
        self.mutations = system.spec_mutations
        self._proc_ids: dict = {}   # Proc -> part id
        self._group_ids: dict = {}  # Group -> part id
        # a group part's id -> the id of its part without the claims (a member's own step never reads them: its
        # verdict is keyed by this one), -1 for a process's part
        self._local_group = np.empty(0, np.int64)
        self._part_ids: dict = {}   # part -> id
        self._parts: list = []      # id -> part
        # the verdict cache, by step key (``_local_key``, ``_verdict``): the keys of the steps that satisfy
        # their spec action (the main job: 61,856, every one), and the others' reasons
        self._passed: set = set()
        self._failed: dict = {}
        # the bits a part id and a view id take in a step key: 12 and 18 keep a key within two 30-bit
        # digits of a Python int (32 bytes); widened by 8 (the cache starts afresh) when an id outgrows them
        self._part_bits, self._view_bits = 12, 18
        # (kind, detail type) -> (label id, whether its spec action is local, whether it reads no claims)
        self._labels: dict = {}
        self._views: dict = {}  # part ids of a state -> view id
        self._invariant: list = []  # view id -> Inv's verdict (None or why not), 0 until known
        # the engines' path (``step_rows``, ``invariant_rows``) numbers views on its own, kept only as packed
        # keys of part-id rows (``_view_rows``): no tuple per view
        self._view_of_rows = RowMemo()
        self._row_views = 0  # row view ids handed out
        self._invariant_marks = np.zeros(0, np.int64)  # row view id -> Inv: 1 holds, 2 fails, 0 not yet
        self._invariant_reasons: dict = {}  # row view id -> why Inv fails
        self._last = self._last_parts = None
        self._before, self._before_view = None, -1  # the last part ids a step left, and their view id
        self._interner = None  # the engine's (checker/engines/interning.py) that the two below index by
        self._gid_parts = np.empty(0, np.int64)  # interned Group id -> part id (-1: not known yet)
        self._pid_parts = np.empty(0, np.int64)  # interned Proc id -> part id (-1: not known yet)
        # the engines' verdicts by packed step key (``step_rows``): an index into _reasons, 0 if it holds
        self._local_verdicts, self._view_verdicts = IntMap(), IntMap()
        self._reasons: list = [None]
        self._reason_ids: dict = {}

    def _proc(self, p) -> int:
        """The id of a process's part: (live, member id, generation, owned, granting,
        grant, Stable, the grant's generation). A grant answers the member's own
        SyncGroup, sent at its generation, and the member changes neither while it
        syncs (a SyncGroupResponse carries no generation, R8): the grant's generation
        is the member's."""
        hit = self._proc_ids.get(p)
        if hit is None:
            if p.status == RUNNING or p.status == PAUSED:
                c = p.consumer
                grant, granting = 0, False
                for r in p.responses:
                    if type(r) is SyncGroupResponse and r.error == Error.NONE:
                        grant |= r.assignment.partitions
                        granting = True
                part = (True, c.member_id, c.generation, c.owned, granting, grant, c.phase == MemberPhase.STABLE,
                        c.generation if granting else spec.NO_GENERATION)
            else:
                part = _NO_PROCESS
            hit = self._proc_ids[p] = self._intern(part)
        return hit

    def _group(self, g, slots: int) -> int:
        """The id of the coordinator's part: (phase, generation, member ids, stored
        assignment per slot, recorded claims per slot, their generations). A slot's
        stored assignment and subscription are its newest member's (the latest
        process's: highest connection epoch, then serial). An older member id of the
        same slot is a dead process's, kept until its session times out (R11): no
        request can speak for it, so nothing is ever granted from its assignment."""
        hit = self._group_ids.get(g)
        if hit is None:
            assigned, newest = [0] * slots, [None] * slots
            claim, claim_generation = [0] * slots, [spec.NO_GENERATION] * slots
            for m in g.members:
                slot, rank = slot_of(m.member_id), (epoch_of(m.conn), m.member_id)
                if newest[slot] is None or rank > newest[slot]:
                    newest[slot], assigned[slot] = rank, m.assignment.partitions
                    claim[slot], claim_generation[slot] = m.subscription.owned, m.subscription.generation
            part = (int(g.phase), g.generation, frozenset(m.member_id for m in g.members), tuple(assigned),
                    tuple(claim), tuple(claim_generation))
            hit = self._group_ids[g] = self._intern(part)
            local = self._intern(part[:4])
            self._local_group = grown(self._local_group, len(self._parts), -1)
            self._local_group[hit] = local
        return hit

    def owner_part(self, group) -> tuple:
        """The coordinator's part of the views of the states with Group ``group``
        without the recorded claims (``_group``'s first four fields: phase, generation,
        member ids, sorted, and stored assignments): a tuple of ints, equal in every
        process. Every memo of this check is keyed by a function of it: a member's own
        step by it, any other step by the view with or without the claims, Inv by the
        view without them. The workers engine places a state with the owner of this
        value (checker/engines/workers.py ``Components.owners``), so that those memos
        fill on one owner only, not on every owner that meets a Group abstracted alike
        (issue 44)."""
        part = self._group(group, self.system.slots)  # first: it may grow _local_group
        phase, generation, members, assigned = self._parts[self._local_group[part]]
        return phase, generation, tuple(sorted(members)), assigned

    def _intern(self, part: tuple) -> int:
        hit = self._part_ids.get(part)
        if hit is None:
            hit = self._part_ids[part] = len(self._parts)
            self._parts.append(part)
            self._part_bits = self._room(hit, self._part_bits)
        return hit

    def _room(self, new_id: int, bits: int) -> int:
        """The bits a key field needs for ids up to ``new_id``: ``bits``, or 8 more when
        it does not fit, the verdict cache then emptied (its keys' layout changes)."""
        if new_id >> bits:
            self._passed, self._failed = set(), {}
            return bits + 8
        return bits

    def parts(self, state: State, base: State | None = None, base_parts: tuple = ()) -> tuple:
        """The abstraction's raw material as a flat tuple of part ids: the group's,
        then each process's. With ``base`` (a state whose parts are ``base_parts``),
        the parts of processes (and the group) that are the very same objects, or
        keep the very same consumer and responses, are reused: a step changes one
        or two, and a delivery only takes a request off its channel."""
        group, procs = state.group, state.procs
        if base is None:
            out = [self._group(group, len(procs))]
            out.extend(self._proc(p) for p in procs)
            return tuple(out)
        proc = self._proc
        return (base_parts[0] if group is base.group else self._group(group, len(procs)),
                *[pid if p is q or (p.consumer is q.consumer and p.responses is q.responses and p.status == q.status)
                  else proc(p) for p, q, pid in zip(procs, base.procs, base_parts[1:])])

    def _part_rows(self, rows: np.ndarray) -> np.ndarray:
        """``parts`` of a batch of states from their interned id rows ((T, w) int64,
        ``Interner.ids``): a (T, w - 1) int64 matrix of part ids, each part's computed
        once per interned id, when first asked."""
        interner, slots = self._interner, rows.shape[1] - 2
        self._gid_parts = grown(self._gid_parts, len(interner.groups), -1)
        self._pid_parts = grown(self._pid_parts, len(interner.procs), -1)
        out = np.empty((len(rows), slots + 1), np.int64)
        out[:, 0] = self._gid_parts[rows[:, 0]]
        out[:, 1:] = self._pid_parts[rows[:, 1:-1]]
        if (out < 0).any():  # parts first seen
            for gid in np.unique(rows[out[:, 0] < 0, 0]).tolist():
                self._gid_parts[gid] = self._group(interner.groups[gid], slots)
            for pid in np.unique(rows[:, 1:-1][out[:, 1:] < 0]).tolist():
                self._pid_parts[pid] = self._proc(interner.procs[pid])
            out[:, 0] = self._gid_parts[rows[:, 0]]
            out[:, 1:] = self._pid_parts[rows[:, 1:-1]]
        return out

    def _view_rows(self, parts: np.ndarray) -> np.ndarray:
        """The row view id of each row of a part-id matrix: dense, one per distinct
        row, in the engines' path's own numbering (not ``_view_id``'s)."""
        def number(firsts):
            first = self._row_views
            self._row_views += len(firsts)
            return range(first, self._row_views)
        return self._view_of_rows.resolve(parts, len(self._parts), number)

    def assemble(self, ids: tuple) -> View:
        """The View of a state from its part ids."""
        parts = self._parts
        phase, generation, mids, assigned, claim, claim_generation = parts[ids[0]]
        live, members, generations, owned, granting, grant, stable, grant_generation = zip(*[parts[i] for i in ids[1:]])
        return View(phase, generation, live, tuple(m in mids for m in members), generations, owned, assigned,
                    granting, grant, stable, grant_generation, claim, claim_generation)

    def view(self, state: State) -> View:
        """The abstraction of a checker state."""
        return self.assemble(self.parts(state))

    def step(self, state: State, action: Action, nxt: State) -> str | None:
        """None if the step satisfies its specification action and both states satisfy
        Inv, else why not. (Inv of a state is checked when its first successor is:
        that covers the initial state and, one step later, every other.)"""
        if state is not self._last:  # a state's successors are checked one after another
            self._last, self._last_parts = state, self.parts(state)
            why = self._invariant_of(self._last_parts)
            if why:
                return why
        after = self.parts(nxt, state, self._last_parts)
        return self._verdict(self._last_parts, after, action, self._label(action)) or self._invariant_of(after)

    def on_rows(self, interner) -> Refinement:
        """This check for the id rows of ``interner``'s states, in two parts:
        ``step_rows`` on every transition, ``invariant_rows`` once on every state
        reached. The tables indexed by ids start afresh for an interner other than
        the last one (another exploration)."""
        if interner is not self._interner:
            self._interner = interner
            self._gid_parts, self._pid_parts = np.empty(0, np.int64), np.empty(0, np.int64)
        return self

    def step_rows(self, before: np.ndarray, after: np.ndarray, aid: np.ndarray, actions: list) -> list:
        """``step`` on a batch of transitions, but for Inv (the engines ask
        ``invariant_rows`` of each state once): from the states with id rows
        ``before`` to those with ``after`` ((T, w) int64, ``Interner.ids``), by
        ``actions[aid[t]]``. Returns ``[(t, why)]`` for the steps that are not their
        spec action. A member's own step (the group's part and every other slot's
        unchanged) is keyed by its label, slot, the group's part without the recorded
        claims (a member's own step never reads them) and its slot's parts before and
        after, any other by its label, slot and the two views; each key's
        verdict is computed once (``_verdict``'s keys, packed in 64 bits). A step that
        changes no part, by an action that admits stutters (spec ``admits_stutters``),
        holds without a key."""
        labels = list(map(self._label, actions))
        label = np.array([x for x, _, _ in labels], np.int64)[aid]
        slot = np.array([a.slot for a in actions], np.int64)[aid]
        pb, pa = self._part_rows(before), self._part_rows(after)
        own = np.where(slot >= 0, slot + 1, -1)  # the acting slot's column (none: -1)
        changed = pb != pa
        elsewhere = (changed & (np.arange(pb.shape[1]) != own[:, None])).any(axis=1)
        local = np.array([x for _, x, _ in labels], bool)[aid] & ~elsewhere
        # a step of no abstract change (the same parts: the same View) by an action with the stutter
        # case holds (spec ``admits_stutters``): no key, no evaluation
        held = np.array([spec.admits_stutters(action_name(a), self.mutations) for a in actions], bool)[aid] & \
            ~changed.any(axis=1)
        local &= ~held
        verdict = np.zeros(len(aid), np.int64)
        if len(aid) and (max(pb.max(), pa.max()) >> self.row_part_bits or (slot + 1).max() >> 8 or label.max() >> 7):
            for t in range(len(aid)):  # ids past the packed fields: keyed as ``_verdict`` keys them
                a = actions[aid[t]]
                why = self._verdict(tuple(pb[t].tolist()), tuple(pa[t].tolist()), a, self._label(a))
                verdict[t] = self._reason_id(why)
        else:
            assembled: dict = {}  # part ids -> View, this batch's (a state's successors share the View before)

            def view(ids: list):
                ids = tuple(ids)
                hit = assembled.get(ids)
                if hit is None:
                    hit = assembled[ids] = self.assemble(ids)
                return hit

            def decide(rows, firsts):
                return [self._reason_id(self._evaluate(view(pb[t].tolist()), view(pa[t].tolist()), actions[aid[t]]))
                        for t in (rows[f] for f in firsts)]
            on = local.nonzero()[0]
            col = slot[on] + 1  # the group's column for a step of no slot, as `_verdict` keys it
            keys = label[on] | (slot[on] + 1) << 7 | self._local_group[pb[on, 0]] << 15 | pb[on, col] << 31 | \
                pa[on, col] << 47
            verdict[on] = self._local_verdicts.resolve(keys, lambda _, firsts: decide(on, firsts))
            off = (~local & ~held).nonzero()[0]
            # an action that reads no claims (spec ``reads_claims``) is keyed by views without them
            free = np.array([x for _, _, x in labels], bool)[aid[off]]
            views = self._view_rows(np.concatenate([self._claimless(pb[off], free), self._claimless(pa[off], free)]))
            if len(views) and views.max() >> 24:
                raise OverflowError("more than 2**24 distinct views: past the step key's view fields")
            keys = label[off] | (slot[off] + 1) << 7 | views[:len(off)] << 15 | views[len(off):] << 39
            verdict[off] = self._view_verdicts.resolve(keys, lambda _, firsts: decide(off, firsts))
        return [(t, self._reasons[v]) for t, v in zip(verdict.nonzero()[0].tolist(), verdict[verdict > 0].tolist())]

    def invariant_rows(self, rows: np.ndarray) -> list:
        """``[(i, which clause fails)]`` for the states with id rows ``rows`` ((m, w)
        int64) that break the spec's inductive invariant (spec/actions.py ``Inv``)."""
        parts = self._part_rows(rows)
        views = self._view_rows(self._claimless(parts, np.ones(len(parts), bool)))  # Inv reads no claims
        marks = self._invariant_marks = grown(self._invariant_marks, self._row_views, 0)
        distinct, first = np.unique(views, return_index=True)
        new = marks[distinct] == 0
        for v, i in zip(distinct[new].tolist(), first[new].tolist()):
            bad = spec.invariant_failure(self.assemble(tuple(parts[i].tolist())))
            marks[v] = 2 if bad else 1
            if bad:
                self._invariant_reasons[v] = f"the inductive invariant's clause '{bad}' fails"
        return [(i, self._invariant_reasons[int(views[i])]) for i in (marks[views] == 2).nonzero()[0].tolist()]

    def _claimless(self, parts: np.ndarray, which: np.ndarray) -> np.ndarray:
        """``parts`` (part-id rows) with the group's part of the rows ``which`` (bool)
        replaced by its part without the recorded claims: keys for what reads none."""
        if not which.any():
            return parts
        out = parts.copy()
        out[which, 0] = self._local_group[out[which, 0]]
        return out

    def _label(self, action: Action) -> tuple:
        """``(label id, whether its spec action is local, whether it reads no claims)``
        of the action's kind and detail type."""
        label = self._labels.get((action.kind, type(action.detail)))
        if label is None:
            name = action_name(action)
            label = self._labels[(action.kind, type(action.detail))] = (
                len(self._labels), spec.ACTIONS[name].local, not spec.reads_claims(name))
        return label

    def _verdict(self, before: tuple, after: tuple, action: Action, label: tuple) -> str | None:
        """The step's verdict from the part ids of the states before and after it
        (``label``: the action's ``_label``)."""
        slot = action.slot
        label, local, _ = label
        if local and before[0] == after[0] and before[1:slot + 1] == after[1:slot + 1] and \
                before[slot + 2:] == after[slot + 2:]:
            # a member's own step (the group's part and every other slot's unchanged): its verdict
            # depends on the group and its own slot only, and not on the recorded claims (only the
            # leader's install reads them; the frame's "unchanged" holds of them, the group's part unchanged)
            key = _local_key(label, slot, int(self._local_group[before[0]]), before[slot + 1], after[slot + 1],
                             self._part_bits)
        else:
            if before is not self._before:  # a state's successors are checked one after another
                self._before, self._before_view = before, self._view_id(before)
            after_view = self._view_id(after)  # first: a new view id may widen the layout
            key = label | (slot + 1) << 8 | (self._before_view << self._view_bits | after_view) << 24
        if key in self._passed:
            return None
        hit = self._failed.get(key)
        if hit is None:
            hit = self._evaluate(self.assemble(before), self.assemble(after), action)
            if hit:
                self._failed[key] = hit
            else:
                self._passed.add(key)
        return hit

    def _evaluate(self, before: View, after: View, action: Action) -> str | None:
        """The step's verdict from the Views of the states before and after it, evaluated
        by the spec (spec/actions.py ``evaluate``), uncached."""
        name = action_name(action)
        why = spec.evaluate(name, before, after, action.slot, self.mutations)
        return why and f"{action.kind} {name} is not the spec's action {name}: {why}"

    def _reason_id(self, why: str | None) -> int:
        """0 for a step that holds, else the index of its reason in ``_reasons``."""
        return 0 if why is None else _intern(self._reason_ids, self._reasons, why)

    def _view_id(self, ids: tuple) -> int:
        """A dense id for a state's abstraction (its tuple of part ids)."""
        hit = self._views.get(ids)
        if hit is None:
            hit = self._views[ids] = len(self._views)
            self._invariant.append(0)
            self._view_bits = self._room(hit, self._view_bits)
        return hit

    def _invariant_of(self, ids: tuple) -> str | None:
        """Inv's verdict on the abstraction with part ids ``ids``, cached by its view id."""
        view = self._view_id(ids)
        hit = self._invariant[view]
        if hit == 0:
            bad = spec.invariant_failure(self.assemble(ids))
            hit = self._invariant[view] = bad and f"the inductive invariant's clause '{bad}' fails"
        return hit


def checker(system: System) -> Refinement:
    """The system's refinement checker (built once per system and kept on it, caches included)."""
    r = system.refinement
    if r is None:
        r = system.refinement = Refinement(system)
    return r


def refinement(system: System, state: State, action: Action, nxt: State):
    """The ``refinement`` property, checked on every transition (spec/SPEC.md section 8)."""
    return checker(system).step(state, action, nxt)


# on batches of interned id rows (checker/engines/steps.py), the ids the system's interner's
# (``System.interner``): the step's spec action on every transition, ``step_rows``, and Inv on the
# state it reaches, ``invariant_rows``, asked once per state
refinement.on_rows = lambda system: checker(system).on_rows(system.interner).step_rows
refinement.on_arrival = lambda system: checker(system).on_rows(system.interner).invariant_rows
# the value the workers engine partitions states by (``Refinement.owner_part``)
refinement.partition = lambda system: checker(system).owner_part


def _local_key(label: int, slot: int, group: int, before: int, after: int, bits: int) -> int:
    """The verdict cache's key of a member's own step: its label (7 bits), its slot (16
    bits), the group's part and the slot's parts before and after (``bits`` each),
    packed in one int: cheap to hash and small to keep. Bit 7 tells it from the key
    of any other step (``Refinement._verdict``)."""
    return label | 128 | (slot + 1) << 8 | ((group << bits | before) << bits | after) << 24
