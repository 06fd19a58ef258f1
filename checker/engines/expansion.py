"""``System.successors`` on interned ids, a batch of states at once (issue 17,
"successor generation on ids").

A global state is ``(group id, proc id per client slot, faults left)``
(checker/engines/interning.py); a batch of them is an int64 matrix of such id
rows. Most successors change the group and one or two slots, and what they
change depends on those parts only, so they are computed on the matrix with
numpy from tables filled once per part:

* per client slot, a table indexed by proc id (``_slot_row``): the delivery of the
  slot's head request (its Action, the Receive event's id, the process without
  the request), the speaker id of what ``System.speaks_for`` reads of the process,
  the process's own steps (``System.local_steps``: reply, heartbeat,
  ScheduledRebalanceTimeout, commit, each an Action id and the proc id after),
  its Streams steps (counted; computed on the State), whether a tick counts its
  timer down, its environment steps (``System.slot_environment``), what it owns
  while live and whether it shares an overlap (R41);
* per ``(group id, event id)``: the coordinator's step (``System.coordinator_step``),
  the group's id after it and its replies as a route id; per ``(proc id, reply
  id)``: the process with that reply routed to it (``System.routed``);
* per ``(speaker id, group id)``: which of the group's armed timers a slot blocks
  (it keeps live a member they wait for); per group id its armed timers, each
  with the group's id after it fires and its replies.

An OffsetCommit the coordinator accepts has its committer record who shared what
(R41), memoised per (proc id, the masks it adds). A successor whose value depends
on more than those parts is computed by ``System`` on the State and interned, in
its place: that record where a mask is too wide to pack, a reply or a fault that
may release another slot's overlap (``shared``), Streams' steps, the clock, and
the faults that act on the group or every slot (KIP-345's, create-topic) or a
rolling upgrade's bounces. A timed system, or one with static members, has every
successor computed on the State (``System.successors``; its clock and the static
slots' restart history read a slot and the group together).
The successors, and their order, are ``System.successors``'s.
"""
from __future__ import annotations

import numpy as np

from ..system import (
    PAUSED, RUNNING, Action, System, _overlapping, _released, _with_proc, recorded,
)
from .interning import IntMap, Interner, _intern, grown

from rebalance.model.protocol import Error, OffsetCommit, slot_of

# a slot table's columns (``_slot_row``); an Action id or a count of -1 or 0: none
(D_AID, D_EID, D_POP, D_COMMIT, D_PARTS, SPEAKER, R_AID, R_PID, H_AID, H_PID, H_EID, S_AID, S_PID, C_AID,
 C_PID, STREAMS, TICKS, E_START, E_LEN, OWNED, SHARED) = range(21)
COLUMNS = 21
# the blocks of a state's successors, in System.successors's order: per slot (``SLOT_BLOCKS`` each) its
# delivery, reply, heartbeat, ScheduledRebalanceTimeout, commit and Streams steps; then the timers, the
# tick and the environment's steps
DELIVER, REPLY, HEARTBEAT, SCHEDULED, COMMIT_STEP, STREAMS_STEPS = range(6)
SLOT_BLOCKS = 6
OWNED_LIMIT = 1 << 62  # owned bitmasks past this are compared on the State


class Successors:
    """A batch's transitions (``Expander.rows``), in order: ``src`` (T,) int64, the
    position of each one's state in the batch; ``aid`` (T,) its Action's id
    (``Expander.actions``); ``raw`` (T, w) int64, the successor's id row, not
    renamed."""

    def __init__(self, src: np.ndarray, aid: np.ndarray, raw: np.ndarray):
        self.src, self.aid, self.raw = src, aid, raw


class _Parts:
    """The transitions of a batch as they are made, block by block: arrays of source
    position, block, index in block, Action id and id rows, and the rows to be
    recomputed on States (``commits``: (entry index, slot, event id) of an
    OffsetCommit's delivery)."""

    def __init__(self, width: int):
        self.src, self.block, self.sub, self.aid, self.rows = [], [], [], [], []
        self.width = width
        self.count = 0
        self.commits: list = []

    def add(self, src: np.ndarray, block, sub, aid: np.ndarray, rows: np.ndarray) -> int:
        """Add ``len(src)`` transitions; returns the entry index of the first."""
        at = self.count
        n = len(src)
        self.src.append(src)
        self.block.append(np.broadcast_to(np.asarray(block, np.int64), (n,)))
        self.sub.append(np.broadcast_to(np.asarray(sub, np.int64), (n,)))
        self.aid.append(aid)
        self.rows.append(rows)
        self.count += n
        return at


class Expander:
    """``rows(matrix, states)``: the successors of a batch of states, as
    ``System.successors`` gives them (un-renamed). Its tables are keyed by
    ``interner``'s ids, so it lives as long as that interner."""

    def __init__(self, system: System, interner: Interner):
        self.system, self.interner = system, interner
        self.actions: list = []     # Action id -> Action
        self._action_ids: dict = {}
        self._events: dict = {}     # (connection, request) -> event id
        self._event_list: list = []  # event id -> Receive event
        self._speakers: dict = {}   # (slot, epoch, member id, joining) or None -> speaker id
        self._speaker_of: list = []  # speaker id -> (slot, proc id) of a process it stands for
        self._reply_ids: dict = {}  # (connection, response) -> reply id
        self._replies: list = []    # reply id -> (connection, response)
        self._route_ids: dict = {}  # routes ((slot, reply id), ...) -> route id
        self._routes: list = []     # route id -> routes
        self._route_table = np.zeros((0, 1), np.int64)  # route id -> (length, slot, reply id, slot, ...)
        self._accepts = np.zeros(0, bool)  # route id -> whether its first reply is NONE (``_record``)
        self._handled = IntMap()    # group id << 32 | event id -> group id after << 32 | route id
        self._stutter = IntMap()    # group id << 32 | heartbeat event id -> 1 if a stutter, else 0
        self._routed = IntMap()     # proc id << 32 | reply id -> proc id
        self._released = IntMap()   # proc id << 35 | slot << 28 | that slot's proc id -> proc id (``_release``)
        self._recorded = IntMap()   # proc id << 32 | the masks an OffsetCommit adds, packed -> proc id (``_record``)
        self._sharing = np.zeros(0, np.int64)  # proc id -> 1 if it shares an overlap, 0 if not, -1 not known yet
        self._blocks = IntMap()     # speaker id << 32 | group id -> bits of the group's timers it blocks
        self._timers: dict = {}     # group id -> ((member ids waited for, Action id), ...) (``_armed``)
        self._all_armed = np.zeros(0, np.int64)  # group id -> bits of all its armed timers (-1: not known yet)
        self._fired = IntMap()      # group id << 8 | timer index -> group id after << 32 | route id
        self._tables: list = []     # per slot: (proc id -> row index, (rows, COLUMNS) int64 rows, rows used)
        self._env: list = [[], [], []]  # the environment's steps: Action ids, proc ids after, faults spent
        self._env_arrays = (np.zeros(0, np.int64),) * 3
        # faults that act on the group or every slot (KIP-345's, create-topic) or a rolling upgrade's
        # bounces: the environment's steps are then System's, on the State
        self._whole = system.whole_environment
        # every successor on the State: the timed mode's clock and the static slots' restart history read the
        # group and a slot together (System.heard, timed_tick); these configurations are small
        self._whole_states = system.timing is not None or bool(system.static)

    def action_id(self, action: Action) -> int:
        return _intern(self._action_ids, self.actions, action)

    def _route_id(self, replies) -> int:
        """The route id of the coordinator's ``replies``: ``((slot, reply id), ...)``, in order."""
        routes = tuple((slot_of(conn), _intern(self._reply_ids, self._replies, (conn, response)))
                       for conn, response in replies)
        return _intern(self._route_ids, self._routes, routes)

    def _slot_row(self, s: int, pid: int) -> list:
        """Slot ``s``'s table row for process ``pid`` (the module docstring; columns
        ``D_AID`` .. ``SHARED``)."""
        system, interner, action_id = self.system, self.interner, self.action_id
        p = interner.procs[pid]
        row = [0] * COLUMNS
        row[D_AID] = row[R_AID] = row[H_AID] = row[S_AID] = row[C_AID] = -1
        if p.requests:
            action, event, popped = system.delivery(s, p)
            row[D_AID], row[D_EID], row[D_POP] = (action_id(action), _intern(self._events, self._event_list, event),
                                                  interner.proc_id(popped))
            if type(event.request) is OffsetCommit:
                row[D_COMMIT] = 1
                row[D_PARTS] = event.request.partitions if event.request.partitions < OWNED_LIMIT else -1
        row[SPEAKER] = self._speakers.setdefault(system.speaker(s, p), len(self._speakers))
        if row[SPEAKER] == len(self._speaker_of):  # a new speaker: a process it stands for
            self._speaker_of.append((s, pid))
        if p.status == RUNNING:
            reply, heartbeat, scheduled, commit, *streams = system.local_steps(s, p)
            for step, a, q in ((reply, R_AID, R_PID), (heartbeat, H_AID, H_PID), (scheduled, S_AID, S_PID),
                               (commit, C_AID, C_PID)):
                if step is not None:
                    row[a], row[q] = action_id(step[0]), interner.proc_id(step[1])
            if heartbeat is not None:
                event = system.heartbeat_event(s, p, heartbeat)  # None: a heartbeat that is never a stutter
                row[H_EID] = -1 if event is None else _intern(self._events, self._event_list, event)
            row[STREAMS] = len(streams)
        row[TICKS] = system.ticks(p)
        env = self._env
        row[E_START] = len(env[0])
        for a, q, cost in system.slot_environment(s, p):
            env[0].append(action_id(a))
            env[1].append(interner.proc_id(q))
            env[2].append(cost)
        row[E_LEN] = len(env[0]) - row[E_START]
        if p.status == RUNNING or p.status == PAUSED:
            owned = p.consumer.owned
            row[OWNED] = owned if owned < OWNED_LIMIT else -1
        row[SHARED] = bool(p.shared)
        return row

    def _table(self, s: int, pids: np.ndarray) -> np.ndarray:
        """Slot ``s``'s table rows for ``pids`` (a new array), the ones not known yet
        filled first. A slot's rows are kept compactly, in the order first asked (a
        process is seen in one slot or few), found through an index by proc id."""
        while len(self._tables) <= s:
            self._tables.append((np.zeros(0, np.int64), np.zeros((0, COLUMNS), np.int64), 0))
        index, rows, count = self._tables[s]
        index = grown(index, len(self.interner.procs), -1)
        at = index[pids]
        if (at < 0).any():
            new = np.unique(pids[at < 0])
            filled = [self._slot_row(s, pid) for pid in new.tolist()]  # may intern new processes
            if count + len(new) > len(rows):
                rows = np.concatenate([rows, np.zeros((len(new) + len(rows) // 4 + 16, COLUMNS), np.int64)])
            rows[count:count + len(new)] = filled
            index = grown(index, len(self.interner.procs), -1)
            index[new] = np.arange(count, count + len(new))
            count += len(new)
            at = index[pids]
        self._tables[s] = (index, rows, count)
        return rows[at]

    def _route(self, out: np.ndarray, route: np.ndarray) -> None:
        """``System.route`` on id rows: ``out``'s rows with the replies of route ids
        ``route`` routed to their slots' processes, in order."""
        done = len(self._route_table)
        if done < len(self._routes):  # the routes new since: their rows appended, the table widened if need be
            new = self._routes[done:]
            width = max(self._route_table.shape[1], 1 + 2 * max(map(len, new)))
            table = np.zeros((len(self._routes), width), np.int64)
            table[:done, :self._route_table.shape[1]] = self._route_table
            for r, routes in enumerate(new, done):
                table[r, 0] = len(routes)
                for j, (t, rid) in enumerate(routes):
                    table[r, 1 + 2 * j], table[r, 2 + 2 * j] = t, rid
            self._route_table = table
        entries = self._route_table[route]
        interner, replies = self.interner, self._replies

        def routed(keys, _):
            return [interner.proc_id(System.routed(interner.procs[k >> 32], *replies[k & 0xFFFFFFFF])) for k in keys]
        for j in range(int(entries[:, 0].max()) if len(entries) else 0):
            on = (entries[:, 0] > j).nonzero()[0]
            cols = 1 + entries[on, 1 + 2 * j]
            out[on, cols] = self._routed.resolve(out[on, cols] << 32 | entries[on, 2 + 2 * j], routed)

    def _coordinator(self, memo: IntMap, keys: np.ndarray, step) -> tuple:
        """``(group ids after, route ids)`` of coordinator steps keyed by ``keys``
        (``memo``'s), ``step(key) -> (Group after, replies)`` computing a new one."""
        interner = self.interner

        def compute(new, _):
            return [interner.group_id(g2) << 32 | self._route_id(replies) for g2, replies in map(step, new)]
        got = memo.resolve(keys, compute)
        return got >> 32, got & 0xFFFFFFFF

    def rows(self, matrix: np.ndarray, states: list) -> Successors:
        """The successors of the states with id rows ``matrix`` ((m, w) int64) and
        States ``states``, in the order of the states and, per state, in
        ``System.successors``'s order."""
        system, interner = self.system, self.interner
        m, width = matrix.shape
        slots = width - 2
        if self._whole_states:
            parts = _Parts(width)
            for i, state in enumerate(states):
                ids = tuple(matrix[i].tolist())
                self._python(parts, i, 0, [(a, interner.ids(n, state, ids)) for a, n in system.successors(state)])
            return self._assemble(parts, matrix, states)
        gid = matrix[:, 0]
        tables = [self._table(s, matrix[:, 1 + s]) for s in range(slots)]
        shared = np.zeros(m, bool)
        for t in tables:
            shared |= t[:, SHARED] == 1
        owned = np.stack([t[:, OWNED] for t in tables], axis=1)
        parts = _Parts(width)
        groups, events = interner.groups, self._event_list
        for s, t in enumerate(tables):
            base = s * SLOT_BLOCKS
            on = (t[:, D_AID] >= 0).nonzero()[0]  # a delivery
            if len(on):
                g2, route = self._coordinator(self._handled, gid[on] << 32 | t[on, D_EID],
                                              lambda k: system.coordinator_step(groups[k >> 32], events[k & 0xFFFFFFFF]))
                out = matrix[on].copy()
                out[:, 0] = g2
                out[:, 1 + s] = t[on, D_POP]
                self._route(out, route)
                commits = self._record(out, t[on], route, owned[on], s)
                at = parts.add(on, base + DELIVER, 0, t[on, D_AID], out)
                parts.commits.extend(zip((at + commits).tolist(), [s] * len(commits), t[on[commits], D_EID].tolist()))
            for block, a_col, p_col in ((REPLY, R_AID, R_PID), (HEARTBEAT, H_AID, H_PID), (SCHEDULED, S_AID, S_PID),
                                        (COMMIT_STEP, C_AID, C_PID)):
                keep = t[:, a_col] >= 0
                if block == HEARTBEAT and keep.any():  # not a heartbeat the coordinator answers NONE, changing nothing
                    on = (keep & (t[:, H_EID] >= 0)).nonzero()[0]
                    keep[on] = self._stutter.resolve(gid[on] << 32 | t[on, H_EID], self._stutters) == 0
                elif block == COMMIT_STEP and keep.any():  # R41: only while another live owner shares its partitions
                    on = keep.nonzero()[0]
                    keep[on] = self._overlapping(owned[on], s, lambda j, on=on: states[int(on[j])])
                on = keep.nonzero()[0]
                if len(on):
                    out = matrix[on].copy()
                    out[:, 1 + s] = t[on, p_col]
                    if block == REPLY:  # it may end another slot's overlap
                        self._release(out, s, shared[on])
                    parts.add(on, base + block, 0, t[on, a_col], out)
            for i in (t[:, STREAMS]).nonzero()[0].tolist():
                ids, state = tuple(matrix[i].tolist()), states[i]
                steps = system.local_steps(s, state.procs[s])[4:]
                self._python(parts, i, base + STREAMS_STEPS, [(a, interner.ids(_with_proc(state, s, q, 0), state, ids))
                                                              for a, q in steps])
        self._timer_rows(parts, matrix, tables, slots)
        for i in (np.stack([t[:, TICKS] for t in tables], axis=1).any(axis=1)).nonzero()[0].tolist():
            ids, state = tuple(matrix[i].tolist()), states[i]
            self._python(parts, i, slots * SLOT_BLOCKS + 1,
                         [(a, interner.ids(n, state, ids)) for a, n in system.tick_successors(state)])
        env_block = slots * SLOT_BLOCKS + 2
        if self._whole:
            for i, state in enumerate(states):
                ids = tuple(matrix[i].tolist())
                self._python(parts, i, env_block,
                             [(a, interner.ids(n, state, ids)) for a, n in system.fault_successors(state)])
        else:
            self._environment_rows(parts, matrix, tables, shared, env_block)
        return self._assemble(parts, matrix, states)

    def _record(self, out: np.ndarray, t: np.ndarray, route: np.ndarray, owned: np.ndarray, s: int) -> np.ndarray:
        """``System._committed`` (R41) on the id rows ``out`` of slot ``s``'s deliveries
        (its table rows ``t``, the coordinator's route ids ``route``, each state's row
        of what each slot owns while live, ``owned``): an OffsetCommit the
        coordinator accepted (its first reply NONE) of partitions the committer owns
        and another live process owns too has the committer's process record them
        per slot (``recorded``), memoised per (proc id, the masks added, packed);
        where that changes the process, the others' overlaps are released as
        ``_with_proc`` does. Returns the rows left to compute on the State (a mask
        too wide to pack here); every other delivery leaves the state as it is."""
        done = len(self._accepts)
        if done < len(self._routes):
            self._accepts = np.concatenate([self._accepts, np.array(
                [bool(r) and getattr(self._replies[r[0][1]][1], "error", None) == Error.NONE for r in self._routes[done:]],
                bool)])
        mine = t[:, D_PARTS] & np.maximum(owned[:, s], 0)
        added = [np.zeros(len(t), np.int64) if u == s else mine & np.maximum(owned[:, u], 0)
                 for u in range(owned.shape[1])]
        bits = 32 // owned.shape[1]  # a slot's mask in the memo's key
        wide = (t[:, D_PARTS] < 0) | (owned < 0).any(axis=1) | (out[:, 1 + s] >> 31 != 0)
        for mask in added:
            wide |= mask >> bits != 0
        flagged = (t[:, D_COMMIT] == 1) & self._accepts[route] & ((np.bitwise_or.reduce(added) != 0) | wide)
        on = (flagged & ~wide).nonzero()[0]
        if len(on):
            procs, proc_id, slots = self.interner.procs, self.interner.proc_id, owned.shape[1]

            def record(keys, _):
                return [proc_id(recorded(procs[k >> 32], tuple(k >> (u * bits) & ((1 << bits) - 1)
                                                               for u in range(slots)))) for k in keys]
            key = out[on, 1 + s] << 32
            for u, mask in enumerate(added):
                key |= mask[on] << (u * bits)
            pid = self._recorded.resolve(key, record)
            changed = pid != out[on, 1 + s]
            out[on, 1 + s] = pid
            released = np.zeros(len(out), bool)
            released[on[changed]] = True
            self._release(out, s, released)
        return (flagged & wide).nonzero()[0]

    def _stutters(self, keys: list, _) -> list:
        """Whether each heartbeat event (``group id << 32 | event id``) is a stutter in its group."""
        out = []
        for k in keys:
            group = self.interner.groups[k >> 32]
            out.append(int(self.system.stutters(group, self._event_list[k & 0xFFFFFFFF])))
        return out

    @staticmethod
    def _overlapping(owned: np.ndarray, s: int, state_of) -> np.ndarray:
        """Whether slot ``s``'s running consumer owns a partition another live process
        owns (``_overlapping``), per state (``owned``: each one's row of what each slot
        owns while live); on the State, ``state_of(row)``, where an owned mask is too
        wide."""
        out = (owned[:, s] & _owned_elsewhere(owned, s)) != 0
        wide = ((owned < 0).any(axis=1)).nonzero()[0]
        out[wide] = [_overlapping(state_of(i).procs, s) for i in wide.tolist()]
        return out

    def _timer_rows(self, parts: _Parts, matrix: np.ndarray, tables: list, slots: int) -> None:
        """The armed coordinator timers that fire (R21: every member they wait for is
        silent), per state in the order of ``armed_timers``: those of the group's
        armed ones that no slot blocks, a slot blocking a timer when it keeps live
        (``System.speaks_for``) a member the timer waits for."""
        interner = self.interner
        gid = matrix[:, 0]

        def blocks(keys, _):
            out = []
            for k in keys:
                s, pid = self._speaker_of[k >> 32]
                live = self.system.speaks_for(interner.groups[k & 0xFFFFFFFF], s, interner.procs[pid])
                out.append(sum(1 << j for j, (waiting, _) in enumerate(self._armed(k & 0xFFFFFFFF))
                               if not live.isdisjoint(waiting)))
            return out
        speakers = np.stack([t[:, SPEAKER] for t in tables], axis=1)
        blocked = self._blocks.resolve((speakers << 32 | gid[:, None]).reshape(-1), blocks).reshape(len(matrix), slots)
        self._all_armed = grown(self._all_armed, len(interner.groups), -1)
        for g in np.unique(gid[self._all_armed[gid] < 0]).tolist():
            self._all_armed[g] = (1 << len(self._armed(g))) - 1
        masks = self._all_armed[gid] & ~np.bitwise_or.reduce(blocked, axis=1)
        groups, block = interner.groups, slots * SLOT_BLOCKS
        for k in range(int(masks.max()).bit_length() if len(masks) else 0):
            on = (masks >> k & 1).nonzero()[0]
            if not len(on):
                continue
            g = gid[on]
            g2, route = self._coordinator(self._fired, g << 8 | k,
                                          lambda key: self.system.coordinator_step(
                                              groups[key >> 8], self.actions[self._timers[key >> 8][key & 0xFF][1]].detail))
            out = matrix[on].copy()
            out[:, 0] = g2
            self._route(out, route)
            parts.add(on, block, k, np.array([self._timers[x][k][1] for x in g.tolist()], np.int64), out)

    def _armed(self, gid: int) -> tuple:
        """Group ``gid``'s armed timers (``armed_timers``): ``((member ids waited for,
        Action id), ...)``. Raises OverflowError past 62 of them (a mask's bits)."""
        armed = self._timers.get(gid)
        if armed is None:
            armed = self._timers[gid] = tuple((waiting, self.action_id(Action("timer", -1, ev)))
                                              for ev, waiting in self.system.armed_timers(self.interner.groups[gid]))
            if len(armed) > 62:
                raise OverflowError("more than 62 armed timers in a group: past the timer masks' bits")
        return armed

    def _environment_rows(self, parts: _Parts, matrix: np.ndarray, tables: list, shared: np.ndarray,
                          block: int) -> None:
        """Each slot's environment steps within the budget (``System.slot_environment``)."""
        env = self._env
        done = len(self._env_arrays[0])
        if done < len(env[0]):  # the steps new since appended
            self._env_arrays = tuple(np.concatenate([a, np.array(column[done:], np.int64)])
                                     for a, column in zip(self._env_arrays, env))
        e_aid, e_qid, e_cost = self._env_arrays
        left = matrix[:, -1]
        for s, t in enumerate(tables):
            lengths = t[:, E_LEN]
            for j in range(int(lengths.max()) if len(lengths) else 0):
                on = (lengths > j).nonzero()[0]
                at = t[on, E_START] + j
                cost = e_cost[at]
                ok = cost <= left[on]
                on, at, cost = on[ok], at[ok], cost[ok]
                if not len(on):
                    continue
                out = matrix[on].copy()
                out[:, 1 + s] = e_qid[at]
                out[:, -1] -= cost
                self._release(out, s, shared[on])
                parts.add(on, block + s, j, e_aid[at], out)

    def _release(self, out: np.ndarray, s: int, shared: np.ndarray) -> None:
        """``_released`` on id rows: in ``out``'s rows where ``shared`` (an overlap is
        shared, R41), every process that shares with slot ``s`` what slot ``s``'s new
        process no longer owns forgets it; memoised per (proc id, slot, slot ``s``'s
        proc id)."""
        on = shared.nonzero()[0]
        if not len(on):
            return
        procs, proc_id = self.interner.procs, self.interner.proc_id

        def released(keys, _):
            out = []
            for k in keys:
                p, q = procs[k >> 35], procs[k & 0xFFFFFFF]
                r = _released((p,), s, q.consumer.owned if q.consumer else 0)[0]
                out.append(k >> 35 if r is p else proc_id(r))
            return out
        pids = out[on, 1:-1]
        mine = pids[:, s]
        if pids.max() >> 28:
            raise OverflowError("more than 2**28 processes: past the release memo's key fields")
        self._sharing = grown(self._sharing, len(procs), -1)
        flags = self._sharing[pids]
        if (flags < 0).any():
            for k in np.unique(pids[flags < 0]).tolist():
                self._sharing[k] = bool(procs[k].shared)
            flags = self._sharing[pids]
        row, slot = (flags == 1).nonzero()  # a process sharing an overlap
        if len(row):
            out[on[row], 1 + slot] = self._released.resolve(pids[row, slot] << 35 | s << 28 | mine[row], released)

    def _python(self, parts: _Parts, i: int, block: int, steps: list) -> None:
        """Add state ``i``'s transitions ``[(Action, id tuple), ...]``, computed on its State."""
        if steps:
            parts.add(np.full(len(steps), i, np.int64), block, np.arange(len(steps)),
                      np.array([self.action_id(a) for a, _ in steps], np.int64),
                      np.array([ids for _, ids in steps], np.int64).reshape(len(steps), parts.width))

    def _assemble(self, parts: _Parts, matrix: np.ndarray, states: list) -> Successors:
        """The batch's transitions in order (by state, block, index in block), the
        rows that depend on more than their parts recomputed on the States."""
        if not parts.count:
            return Successors(np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros((0, parts.width), np.int64))
        src, block, sub = np.concatenate(parts.src), np.concatenate(parts.block), np.concatenate(parts.sub)
        aid, rows = np.concatenate(parts.aid), np.concatenate(parts.rows)
        system, interner = self.system, self.interner
        for at, s, eid in parts.commits:  # R41: the coordinator's decision recorded per sharing slot
            i = int(src[at])
            state, ids = states[i], tuple(matrix[i].tolist())
            event = self._event_list[eid]
            rows[at] = interner.ids(system._committed(state, interner.state(tuple(rows[at].tolist())), s, event),
                                    state, ids)
        order = np.lexsort((sub, block, src))
        return Successors(src[order], aid[order], rows[order])


def _owned_elsewhere(owned: np.ndarray, s: int) -> np.ndarray:
    """Per state, what the live processes of every slot but ``s`` own (``owned``: each
    state's row of what each slot owns while live, -1 where too wide: left out)."""
    out = np.zeros(len(owned), np.int64)
    for t in range(owned.shape[1]):
        if t != s:
            out |= np.maximum(owned[:, t], 0)
    return out
