"""``System.successors`` on interned ids (issue 17, "successor generation on ids").

A global state is ``(group id, proc id per client slot, faults left)``
(checker/engines/interning.py). Most of its successors change the group and
one or two slots, and what they change depends on those parts only, so they
are cached on small int keys instead of being rebuilt as NamedTuples and hashed
again:

* per ``(group id, slot, proc id)``: the delivery of the slot's head request
  (the group's id after it, the slot's process without the request, the
  coordinator's replies as reply ids), the member ids the slot's process keeps
  live (``System.speaks_for``) and the process's own steps
  (``System.own_steps``: reply, heartbeat, ScheduledRebalanceTimeout, commit)
  and its environment steps (a resume, the faults of ``System._faults``);
* per ``(proc id, reply id)``: the process with that reply routed to it
  (``System.routed``);
* per group id: its armed timers, each with the group's id after it fires and
  its replies.

The order of successors, and every successor, are ``System.successors``'s: the
steps whose result depends on more than those parts (an OffsetCommit's record
of who shared what, R41; a reply releasing another slot's ``shared``; a commit,
offered only while another owner shares its partitions; Streams' steps; the
clock; a fault while an overlap is shared; the faults that act on the group or
every slot, KIP-345's and create-topic, and a rolling upgrade's bounces) are
computed by ``System`` on the State and interned. Handlers are the model's: the
coordinator's through ``System.coordinator_step``, cached here on ids only (not in
``System``'s memo too), the members' through ``System``'s memos.
"""
from __future__ import annotations

from array import array

from ..system import (
    CREATE_TOPIC, FAILOVER, REMOVE, RUNNING, Action, State, System, _overlapping, _released, _with_proc, stutters,
    ticks,
)
from .interning import Interner, _intern

from rebalance.model.coordinator import armed_timers
from rebalance.model.member import MemberPhase
from rebalance.model.protocol import OffsetCommit, slot_of


class Expander:
    """``successors(ids, state)``: ``[(Action, successor ids), ...]``, the ids of
    ``System.successors(state)``'s successors (un-renamed), in its order. Its caches
    are keyed by ``interner``'s ids, so it lives as long as that interner."""

    def __init__(self, system: System, interner: Interner):
        self.system, self.interner = system, interner
        self._slots: dict = {}      # proc id << 9 | slot -> the process's part (``_slot``)
        self._events: dict = {}     # (connection, request) -> event id
        self._event_list: list = []  # event id -> Receive event
        self._stutter: dict = {}    # group id << 32 | heartbeat event id -> whether it is a stutter
        self._handled: dict = {}    # group id << 32 | event id -> (group id after, routes, stutters)
        self._speakers: dict = {}   # (slot, epoch, member id, joining) -> speaker id
        self._member_sets: dict = {}  # each set of member ids -> its index in _member_list
        self._member_list: list = []
        # per speaker id, by group id: 1 + the _member_list index of the member ids it keeps live (0: not
        # known yet); a dense table, as most pairs are asked (main job: 29,413 of 16 x 5,283, 9 sets)
        self._live: list = []
        self._routed: dict = {}     # proc id << 32 | reply id -> proc id
        self._reply_ids: dict = {}  # (connection, response) -> reply id
        self._route_values: dict = {}  # each routes tuple, once (main job: 1,013 among 18,146 group steps)
        self._replies: list = []    # reply id -> (connection, response)
        self._timers: dict = {}     # group id -> ((member ids waited for, Action), ...)
        self._timer_values: dict = {}  # each (member ids waited for, Action), once: groups share them
        self._fired: dict = {}      # group id << 8 | timer index -> (group id after, routes)
        self._env: dict = {}        # proc id << 9 | slot -> the slot's environment steps (``_environment``)
        # faults that act on the group or every slot (KIP-345's, create-topic) or a rolling upgrade's
        # bounces: the environment's steps are then System's, on the State
        self._whole = bool(system.stages) or bool({REMOVE, FAILOVER, CREATE_TOPIC} & set(system.faults))

    def _routes(self, replies) -> tuple:
        """``((slot, reply id), ...)`` for the coordinator's ``replies``, in order."""
        routes = tuple((slot_of(conn), _intern(self._reply_ids, self._replies, (conn, response)))
                       for conn, response in replies)
        return self._route_values.setdefault(routes, routes)

    def _route(self, pids: list, routes: tuple) -> None:
        """``System.route`` on proc ids: ``pids[slot]`` with each reply routed to it."""
        cache = self._routed
        for t, rid in routes:
            key = pids[t] << 32 | rid
            hit = cache.get(key)
            if hit is None:
                interner = self.interner
                hit = cache[key] = interner.proc_id(System.routed(interner.procs[pids[t]], *self._replies[rid]))
            pids[t] = hit

    def _stutters(self, gid: int, eid: int) -> bool:
        """Whether heartbeat event ``eid`` is a stutter in group ``gid`` (``System.own_steps``)."""
        group = self.interner.groups[gid]
        after = self.system.coordinator_step(group, self._event_list[eid])
        hit = self._stutter[gid << 32 | eid] = stutters(group, *after)
        return hit

    def _handle(self, gid: int, eid: int) -> tuple:
        """The coordinator in group ``gid`` handles event ``eid``: ``(group id after,
        routes)``."""
        group = self.interner.groups[gid]
        g2, replies = self.system.coordinator_step(group, self._event_list[eid])
        hit = self._handled[gid << 32 | eid] = (self.interner.group_id(g2), self._routes(replies))
        return hit

    def _slot(self, s: int, pid: int) -> tuple:
        """What slot ``s``'s successors take from its process ``pid`` alone: ``(delivery,
        speaker id, own steps, counts)``. Delivery: None or ``(Action, event id, proc id
        without the request, the Receive event if an OffsetCommit)``; speaker id:
        what ``System.speaks_for`` reads of the process; own steps: None (not
        running) or ``(reply, heartbeat, scheduled, commit, streams steps)``, each
        None or ``(Action, proc id)``, the heartbeat ``(Action, proc id, event id)``
        (it stutters by the group, ``_handle``), the Streams steps ``((Action,
        Proc), ...)``; counts: whether a tick counts its timer down (R38,
        ``System.tick_successors``)."""
        system, interner = self.system, self.interner
        p = interner.procs[pid]
        delivery = steps = None
        if p.requests:
            action, event, popped = system.delivery(s, p)
            delivery = (action, _intern(self._events, self._event_list, event), interner.proc_id(popped),
                        event if type(event.request) is OffsetCommit else None)
        c = p.consumer
        speaker = self._speakers.setdefault(
            (s, p.epoch, c.member_id, c.phase == MemberPhase.JOINING) if p.status == RUNNING else None,
            len(self._speakers))
        if speaker == len(self._live):  # a new speaker: its row of the _live table
            self._live.append(array("i"))
        if p.status == RUNNING:
            reply, heartbeat, scheduled, commit, *streams = system.local_steps(s, p)
            if heartbeat is not None:
                eid = _intern(self._events, self._event_list, system.heartbeat_event(s, p, heartbeat))
                heartbeat = (heartbeat[0], interner.proc_id(heartbeat[1]), eid)
            steps = (*[None if x is None else (x[0], interner.proc_id(x[1])) for x in (reply,)], heartbeat,
                     *[None if x is None else (x[0], interner.proc_id(x[1])) for x in (scheduled, commit)],
                     tuple(streams))
        hit = self._slots[pid << 9 | s] = (delivery, speaker, steps, ticks(p))
        return hit

    def _speaks(self, gid: int, s: int, pid: int, speaker: int) -> frozenset:
        """The member ids slot ``s``'s process ``pid`` (speaker id ``speaker``) keeps live in
        group ``gid`` (``System.speaks_for``), entered in the ``_live`` table."""
        live = System.speaks_for(self.interner.groups[gid], s, self.interner.procs[pid])
        k = _intern(self._member_sets, self._member_list, live)
        row = self._live[speaker]
        if len(row) <= gid:  # grown to every group interned so far: few growths
            row.frombytes(bytes(4 * (max(gid + 1, len(self.interner.groups)) - len(row))))
        row[gid] = k + 1
        return live

    def _armed(self, gid: int) -> tuple:
        """Group ``gid``'s armed timers: ``((member ids waited for, Action), ...)``."""
        timers = self._timer_values
        hit = self._timers[gid] = tuple(timers.setdefault(timer, timer) for timer in (
            (waiting, Action("timer", -1, ev)) for ev, waiting in armed_timers(self.interner.groups[gid])))
        return hit

    def _fire(self, gid: int, k: int, action: Action) -> tuple:
        """Timer ``k`` of group ``gid`` fires: ``(group id after, routes)``."""
        g2, replies = self.system.coordinator_step(self.interner.groups[gid], action.detail)
        hit = self._fired[gid << 8 | k] = (self.interner.group_id(g2), self._routes(replies))
        return hit

    def _environment(self, s: int, pid: int) -> tuple:
        """``System.slot_environment`` on ids: ``((Action, proc id after, faults
        spent), ...)``."""
        proc_id = self.interner.proc_id
        hit = self._env[pid << 9 | s] = tuple((a, proc_id(q), cost)
                                              for a, q, cost in self.system.slot_environment(s, self.interner.procs[pid]))
        return hit

    def successors(self, ids: tuple, state: State) -> list:
        """``[(Action, ids), ...]``: ``System.successors(state)`` on ids, ``ids`` being
        ``state``'s (``Interner.ids``); the successors' ids un-renamed."""
        system, interner = self.system, self.interner
        gid, left, pids = ids[0], ids[-1], ids[1:-1]
        procs = state.procs
        out = []
        live = set()
        ticking = False  # whether a running member's timer counts down (``System.tick_successors``)
        shared = any(q.shared for q in procs)  # an overlap (R41) that a step may end
        slots = self._slots
        handled, lives, member_list = self._handled, self._live, self._member_list
        key = gid << 32
        for s, pid in enumerate(pids):
            delivery, speaker, steps, counts = slots.get(pid << 9 | s) or self._slot(s, pid)
            ticking = ticking or counts
            row = lives[speaker]
            known = row[gid] if gid < len(row) else 0
            speaks = member_list[known - 1] if known else self._speaks(gid, s, pid, speaker)
            if speaks:
                live |= speaks
            if delivery is not None:
                action, eid, popped, commit_event = delivery
                g2, routes = handled.get(key | eid) or self._handle(gid, eid)
                ps = list(pids)
                ps[s] = popped
                if routes:
                    self._route(ps, routes)
                raw = (g2, *ps, left)
                if commit_event is not None:  # R41: the coordinator's decision recorded per sharing slot
                    raw = interner.ids(system._committed(state, interner.state(raw), s, commit_event))
                out.append((action, raw))
            if steps is None:
                continue
            reply, heartbeat, scheduled, commit, streams = steps
            if heartbeat is not None:
                stutter = self._stutter.get(key | heartbeat[2])
                if stutter if stutter is not None else self._stutters(gid, heartbeat[2]):
                    heartbeat = None
            if commit is not None and not _overlapping(procs, s):
                commit = None
            for step in (reply, heartbeat, scheduled, commit):
                if step is not None:
                    if step is reply and shared:  # it may end another slot's overlap
                        q = interner.procs[step[1]]
                        n = State(state.group, _released(procs[:s] + (q,) + procs[s + 1:], s, q.consumer.owned), left)
                        out.append((step[0], interner.ids(n, state, ids)))
                    else:
                        out.append((step[0], ids[:s + 1] + (step[1],) + ids[s + 2:]))
            for a, q in streams:
                out.append((a, interner.ids(_with_proc(state, s, q, 0), state, ids)))
        armed = self._timers.get(gid)
        if armed is None:
            armed = self._armed(gid)
        for k, (waiting, action) in enumerate(armed):
            if live.isdisjoint(waiting):
                g2, routes = self._fired.get(gid << 8 | k) or self._fire(gid, k, action)
                ps = list(pids)
                self._route(ps, routes)
                out.append((action, (g2, *ps, left)))
        if ticking:
            for a, n in system.tick_successors(state):
                out.append((a, interner.ids(n, state, ids)))
        if self._whole:
            for a, n in system.fault_successors(state):
                out.append((a, interner.ids(n, state, ids)))
            return out
        env = self._env
        for s, pid in enumerate(pids):
            steps = env.get(pid << 9 | s)
            if steps is None:
                steps = self._environment(s, pid)
            for a, qid, cost in steps:
                if cost > left:
                    continue
                if shared:
                    n = _with_proc(state, s, interner.procs[qid], cost)
                    out.append((a, interner.ids(n, state, ids)))
                else:
                    out.append((a, (*ids[:s + 1], qid, *ids[s + 2:-1], left - cost)))
        return out
