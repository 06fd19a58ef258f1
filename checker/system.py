"""The closed system the checker explores: the coordinator, one process per client
slot, one FIFO channel per connection in each direction, a fault budget.

Time (R21 in spec/SPEC.md): a live member heartbeats, rejoins and syncs in time,
so the coordinator's timers fire only for *silent* members (a crashed, paused,
departed or superseded process): a session timeout at any point after its
member fell silent, a barrier's deadline (rebalance timeout, pending sync) once
every member the barrier waits for is silent; these are untimed, so every order
of them against everything else is explored. A slow live member is modelled by
the ``pause`` fault. A heartbeat that the coordinator would answer NONE without
changing anything is a stutter and is not generated.

The members' ScheduledRebalanceTimeouts (Designs II and III) are deadlines in the
state: each member's countdown in ticks (a relative deadline, so the state stays
finite). A ``tick`` passes between rounds only, when the group is Stable and
nothing is in flight (a round takes far less than a tick) but responses a paused
process has yet to read (its pause is time passing), and only while some
countdown runs; it counts every running member's down (R38).

All protocol decisions are the model's handlers (rebalance.model); this module
only delivers messages, fires timers and injects faults.
"""
from __future__ import annotations

from typing import NamedTuple

from rebalance.model import coordinator, failover, member, upgrade
from rebalance.model.config import KIP848, GroupConfig
from rebalance.model.coordinator import EMPTY_GROUP, Group, armed_timers, formed_group, session_refreshed
from rebalance.model.member import NEW_CONSUMER, Consumer, MemberPhase, assigned_consumer, counting, shutting_down
from rebalance.model.protocol import (
    NO_INSTANCE_ID, NO_MEMBER_ID, CommitDue, CoordinatorLost, Error, HeartbeatDue, JoinGroup, LeaveGroup, LearnerReady,
    Leave,
    MetadataUpdate, OffsetCommit, Phase, Receive, ScaleDown, ScheduledRebalanceDue, Send, Start, Subscribe, Tick,
    connection, epoch_of, instance_id, member_id, partitions_of, slot_of, union, ALL_TOPICS,
)

from . import timed

ABSENT, RUNNING, PAUSED, CRASHED = 0, 1, 2, 3
STATUS_NAMES = ("absent", "running", "paused", "crashed")
FAULTS = ("join", "leave", "crash", "restart", "pause")
# KIP-345's faults (seed 002), explored only when named (R71-R73): an admin client removes a static member
# (batch LeaveGroup by group.instance.id), the coordinator fails over to its stored record, a static member's
# process restarts without group.instance.id
REMOVE, FAILOVER, DOWNGRADE = "remove", "failover", "downgrade"
KIP345_FAULTS = (REMOVE, FAILOVER, DOWNGRADE)
# faults off unless named (R63, R62): a member subscribes to another topic list; a topic is created
SUBSCRIBE, CREATE_TOPIC = "subscribe", "create-topic"
SUBSCRIPTION_FAULTS = (SUBSCRIBE, CREATE_TOPIC)
DELETE_CONNECTOR = "delete-connector"  # R81: a Connect connector deleted (off unless named)
FAULT_KINDS = FAULTS + SUBSCRIPTION_FAULTS + KIP345_FAULTS + (DELETE_CONNECTOR,)  # every fault a configuration
# may name; FAULTS: the default
SCALE_DOWN = "scale_down"  # Streams: the "leave" fault is the scale-down tool's admin input (R53)
UPGRADE = "upgrade"  # the operator bounces a member onto the next assignor list of a rolling upgrade (R79)
ENVIRONMENT = FAULT_KINDS + ("resume", SCALE_DOWN, UPGRADE)  # the environment's actions (no fairness)
BOUNCE = "bounce"  # a leader change outside the budget (checker/engines/churn.py), also the environment's
COMMIT = "commit"  # the application commits what it owns (R41): no fairness, no budget
# every Action kind: the system's own steps, then the application's and the environment's
READY, SHUTDOWN = "ready", "shutdown"  # Streams: a learner's restore finishes (R55); a leaving member stops (R54)
RECONCILE, RELEASE = "reconcile", "release"  # KIP-848: a reconciliation stage; a fenced member's lost callback done
ACTION_KINDS = ("deliver", "reply", "heartbeat", "scheduled", RECONCILE, RELEASE, "timer", "tick", COMMIT, READY,
                SHUTDOWN) + ENVIRONMENT + (BOUNCE,)
TICK = Tick()
COMMIT_DUE = CommitDue()
COORDINATOR_LOST = CoordinatorLost()
ADMIN_EPOCH = 0  # an admin client's connection on a slot: no process has epoch 0, so its reply is dropped


class Proc(NamedTuple):
    """One client slot: its process status, the epoch of its current process (its
    connection), the member state (None unless running or paused) and the
    messages in flight on its connection: ``requests`` to the coordinator and
    ``responses`` to the member, each FIFO.

    Two history variables of the checker's for commits (R41): ``committed``, the
    process sent its OffsetCommit for its current generation and partitions (one
    abstract commit each); ``shared``, () or per client slot ``t`` the partitions
    (a bitmask) for which the coordinator accepted this process's OffsetCommit
    while slot ``t``'s process also owned them, kept only while both still own
    them (``exclusive_commits``).

    ``stage``: in a rolling upgrade (R79), which of the upgrade's assignor lists the
    slot's processes start with (an index into model/upgrade.py ``stages``).
    ``metadata``: the topics that exist (a topic bitmask, R62; ``ALL_TOPICS``: every
    one), as the slot's processes see them: a ``create-topic`` fault sets it on
    every slot, and a process starts with it.

    A history variable of the checker's for Streams (R55): ``restored``, the tasks
    (a bitmask) the process learns whose restore has finished: a ``ready`` step
    (its restore ran to within the acceptable lag), or a learner placed where the
    process ran the task's standby (ready at once); kept while it learns the task.
    What the member reports as ready in its user data is its own claim; this is
    what happened (``learner_ready_before_active``).

    Two for static membership (``static_restart_no_rebalance``): ``quiet``, in the
    timed mode (checker/timed.py), the ticks since the coordinator last received a
    request from the slot's process, kept across its restarts (capped at the
    session timeout; a static slot's only); ``restarting``, where a static slot's
    process is in its restart: ``FRESH`` from its start to its first request,
    ``RESTARTING`` once that request, a JoinGroup with no member id and the slot's
    group.instance.id, reached a Stable group within the session timeout, until
    the process is Stable; then ``KEPT``, its restart answered from the stored
    assignment (R26; GroupMetadataManager.java:8148, Kafka 4.4.0), while the process
    stays Stable at that generation (finding F1's history, checker/findings.py);
    ``NOT_RESTARTING`` otherwise.

    One for KIP-848 in the timed mode (``joins_in_time``, checker/consumer_system.py):
    ``joining``, 0 unless the process is joining (it sent a heartbeat at member epoch 0, or
    was refused since and rejoins), then 1 + the ticks since, until a response gives it a
    member epoch."""

    status: int
    epoch: int
    consumer: Consumer | None
    requests: tuple
    responses: tuple
    shared: tuple = ()
    committed: bool = False
    stage: int = 0
    metadata: int = ALL_TOPICS
    restored: int = 0
    quiet: int = 0
    restarting: int = 0
    joining: int = 0


NOT_RESTARTING, FRESH, RESTARTING, KEPT = 0, 1, 2, 3  # Proc.restarting


class State(NamedTuple):
    """A global state: coordinator, processes (one per slot), faults left."""

    group: Group
    procs: tuple
    faults_left: int


class Action(NamedTuple):
    """A transition label: ``kind`` (deliver, reply, heartbeat, timer, scheduled (a
    member's ScheduledRebalanceTimeout), tick (the clock), or a fault:
    join, leave, crash, restart, pause, resume), the client ``slot`` it concerns
    (-1 for the coordinator's timers and the clock) and the message or timer input (or None)."""

    kind: str
    slot: int
    detail: object


NO_PROC = Proc(ABSENT, 0, None, (), ())


class System:
    """Successor generation for a configuration. Handler results are memoised:
    they are pure, and actor states recur across many global states.

    ``members``: slots running at the start; ``joiners``: further slots a ``join``
    fault may start; ``faults``: the fault kinds enabled; ``max_faults``: the budget;
    ``static``: the slots whose processes are static members (group.instance.id
    ``instance_id(slot)``, kept across restarts); ``spec_mutations``: deliberately
    wrong specification actions the refinement check compares the model with
    (spec/actions.py, SPEC_MUTATIONS); ``start``: the state every engine starts
    from instead of the settled group of ``members`` (a configuration's
    ``[initial]`` and ``[[prefix]]``, checker/situations.py), or None;
    ``timing``: the timed mode's durations (checker/timed.py), None for the untimed
    exploration of R21.
    """

    def __init__(self, cfg: GroupConfig, members: int, joiners: int, faults, max_faults: int,
                 static=frozenset(), spec_mutations=frozenset(), start: State | None = None,
                 timing: timed.Timing | None = None):
        self.cfg = cfg
        self.timing = timing  # the timed mode (checker/timed.py), or None: untimed (R21)
        self.start_state = start
        self.static = frozenset(static)
        self.spec_mutations = frozenset(spec_mutations)
        self.members = members
        self.joiners = joiners
        self.slots = members + joiners
        self.faults = frozenset(faults)
        self.max_faults = max_faults
        self._coord: dict = {}
        self._member: dict = {}
        self._local: dict = {}
        self._timers: dict = {}
        self.stages = upgrade.stages(cfg)  # R79: the rolling upgrade's assignor lists, () if none
        self.refinement = None  # checker/refinement.py's checker and caches, built on first use
        self.judged: dict = {}  # verdicts checker/properties.py computes together, memoised per what they read

    def forget(self) -> None:
        """Drop the memoised handlers' results and the refinement check's caches (pure
        memos: what is asked again is computed again), as an exploration ends."""
        self._coord, self._member, self._local, self._timers, self.judged = {}, {}, {}, {}, {}
        self.refinement = None

    @property
    def spec(self) -> tuple:
        """The constructor's arguments: ``System(*system.spec)`` builds an equal system
        (how the Spark engine rebuilds it on executors, without the caches)."""
        return (self.cfg, self.members, self.joiners, tuple(sorted(self.faults)), self.max_faults,
                tuple(sorted(self.static)), tuple(sorted(self.spec_mutations)), self.start_state, self.timing)

    def instance_of(self, slot: int) -> int:
        """The group.instance.id of ``slot``'s processes (NO_INSTANCE_ID if dynamic)."""
        return instance_id(slot) if slot in self.static else NO_INSTANCE_ID

    # -- memoised handlers -------------------------------------------------------
    def coord(self, group: Group, event) -> tuple:
        """``coordinator_step``, memoised per (Group, event)."""
        key = (group, event)
        hit = self._coord.get(key)
        if hit is None:
            hit = self._coord[key] = self.coordinator_step(group, event)
        return hit

    def coordinator_step(self, group: Group, event) -> tuple:
        """``(Group after, replies)``: the coordinator's handler (model/coordinator.py
        ``handle``) on ``event``, with what a failover would load kept (R72). Not
        memoised: for callers that cache it on keys of their own (the engines', on
        interned ids, checker/engines/expansion.py), so that it is not kept twice."""
        g2, replies = coordinator.handle(self.cfg, group, event)
        if FAILOVER in self.faults:  # R72: keep what a failover would load
            g2 = failover.recorded(group, g2)
        if self.timing is not None:  # the deadlines the step starts, keeps and cancels
            if type(event) is Receive:
                g2 = timed.stepped(self.timing, group, g2, session_refreshed(self.cfg, event.request))
            else:
                g2 = timed.stepped(self.timing, group, g2, NO_MEMBER_ID, fired=event)
        return g2, replies

    member_handler = staticmethod(member.handle)  # the member's pure handler (model/member.py)
    TIMERS = timed.CLASSIC  # the coordinator's timers as the timed mode's clock reads them

    def step_member(self, c: Consumer, event) -> tuple:
        key = (c, event)
        hit = self._member.get(key)
        if hit is None:
            hit = self._member[key] = self.member_handler(self.cfg, c, event)
        return hit

    # -- composition -----------------------------------------------------------------
    @staticmethod
    def route(procs: list, replies) -> None:
        """Put coordinator replies on their connections; replies to a connection
        whose process is gone are dropped (the socket is closed)."""
        for conn, response in replies:
            s = slot_of(conn)
            procs[s] = System.routed(procs[s], conn, response)

    @staticmethod
    def routed(p: Proc, conn: int, response) -> Proc:
        """Process ``p`` (of the slot of ``conn``) with ``response`` appended to its
        responses if ``conn`` is its live connection, else ``p`` itself (dropped)."""
        if p.epoch == epoch_of(conn) and (p.status == RUNNING or p.status == PAUSED):
            return Proc(p.status, p.epoch, p.consumer, p.requests, p.responses + (response,), p.shared,
                        p.committed, p.stage, p.metadata, p.restored, p.quiet, p.restarting, p.joining)
        return p

    @staticmethod
    def requests_of(outputs) -> tuple:
        return tuple(o.request for o in outputs if type(o) is Send)

    def start(self, slot: int, proc: Proc, static: bool = True) -> Proc:
        """A new process on ``slot`` (static if the slot is and ``static``), joining on
        the slot's assignor list (R79), subscription (R61) and metadata (R62)."""
        assignors = self.stages[proc.stage] if self.stages else ()
        c, out = self.step_member(NEW_CONSUMER, Start(self.instance_of(slot) if static else NO_INSTANCE_ID,
                                                      self.cfg.subscription_of(slot), proc.metadata,
                                                      assignors=assignors))
        return Proc(RUNNING, proc.epoch + 1, c, self.requests_of(out), (), stage=proc.stage, metadata=proc.metadata,
                    quiet=proc.quiet, restarting=FRESH if static and slot in self.static else NOT_RESTARTING)

    def coordinator_event(self, state: State, event, procs: list | None = None) -> State:
        procs = list(state.procs) if procs is None else procs
        group, replies = self.coord(state.group, event)
        self.route(procs, replies)
        return State(group, tuple(procs), state.faults_left)

    def started(self) -> State:
        """The configured members just started, their first JoinGroups in flight, the
        group Empty, the fault budget full."""
        none = self.no_proc
        procs = tuple(self.start(s, none) if s < self.members else none for s in range(self.slots))
        return State(EMPTY_GROUP, procs, self.max_faults)

    def initial(self) -> State:
        """The state exploration starts from: ``start`` if given, else the configured
        members started from an empty group and run, deterministically, to a
        quiescent Stable group."""
        if self.timing is not None:  # timed: the untimed settled group, every armed timer at its full duration
            state = type(self)(*self.spec[:-1]).initial()
            never = self.timing.session_ticks  # a static slot with no process yet: the coordinator never heard it
            procs = tuple(p._replace(quiet=never) if s in self.static and p.status == ABSENT else p
                          for s, p in enumerate(state.procs))
            return State(timed.started(self.timing, state.group, self.TIMERS), procs, state.faults_left)
        state = self.start_state if self.start_state is not None else settle(self, self.started())
        if FAILOVER in self.faults and state.group.record is None:  # R72: a starting Stable group is stored
            state = state._replace(group=failover.recorded(state.group, state.group))
        return state

    def stable(self, owned: dict, generation: int, leader_slot: int) -> State:
        """A Stable group at ``generation`` in which each slot of ``owned`` ({slot:
        bitmask}) runs its first member (id ``member_id(slot, 1)``) owning those
        partitions: a scenario's initial state (no faults left)."""
        members, procs = [], list(self.no_proc for _ in range(self.slots))
        everything = union(owned.values())
        for slot, mask in sorted(owned.items()):
            mid, iid = member_id(slot, 1), self.instance_of(slot)
            members.append((mid, iid, connection(slot, 1), mask))
            consumer = assigned_consumer(self.cfg, mid, iid, generation, slot == leader_slot, mask, everything)
            if not self.cfg.uniform:  # R61, R62: the leader waits for the subscribed topics not created yet
                waiting = union(map(self.cfg.subscription_of, owned)) & self.cfg.created_topics
                consumer = consumer._replace(topics=self.cfg.subscription_of(slot), metadata=self.no_proc.metadata,
                                             snapshot=waiting if slot == leader_slot else 0)
            procs[slot] = Proc(RUNNING, 1, consumer, (), (), metadata=self.no_proc.metadata)
        return State(formed_group(members, generation, member_id(leader_slot, 1)), tuple(procs), 0)

    def live_members(self, state: State) -> set:
        """Member ids whose connection belongs to a running process that still holds
        (or, mid-JoinGroup, is being given) that id; the others are silent (R21). A
        process that forgot its member id and is not joining (fenced, R28) speaks
        for nobody; one joining is given the newest member id on its connection (an
        older one there is a member a failover's record brought back, R72)."""
        live = set()
        group = state.group
        for s, p in enumerate(state.procs):
            live |= self.speaks_for(group, s, p)
        return live

    @property
    def whole_environment(self) -> bool:
        """Whether some environment step acts on the group or on every slot (KIP-345's
        faults, create-topic, a rolling upgrade's bounces): the engines then take the
        environment's steps from ``fault_successors`` on each State."""
        return bool(self.stages) or bool({REMOVE, FAILOVER, CREATE_TOPIC, DELETE_CONNECTOR} & self.faults)

    @staticmethod
    def speaker(s: int, p: Proc):
        """What ``speaks_for`` reads of slot ``s``'s process ``p`` (None: it speaks for
        nobody): the engines decide which timers a slot blocks once per such key."""
        if p.status != RUNNING:
            return None
        c = p.consumer
        return (s, p.epoch, c.member_id, c.phase == MemberPhase.JOINING)

    @staticmethod
    def armed_timers(group) -> list:
        """The coordinator's armed timers (model/coordinator.py ``armed_timers``)."""
        return armed_timers(group)

    @staticmethod
    def ticks(p: Proc) -> bool:
        """Whether a tick changes process ``p`` (``ticks``)."""
        return ticks(p)

    def stutters(self, group, event) -> bool:
        """Whether the coordinator's answer to heartbeat ``event`` in ``group`` changes
        nothing (``stutters``)."""
        return stutters(group, *self.coord(group, event))

    @staticmethod
    def speaks_for(group: Group, s: int, p: Proc) -> frozenset:
        """The member ids of ``group`` that slot ``s``'s process ``p`` keeps live
        (``live_members``, the part of one slot)."""
        if p.status != RUNNING:
            return frozenset()
        c = p.consumer
        live = []
        for m in group.members:
            if slot_of(m.conn) == s and p.epoch == epoch_of(m.conn):
                if c.member_id == m.member_id or (c.member_id == NO_MEMBER_ID and c.phase == MemberPhase.JOINING
                                                  and m.member_id == max(n.member_id for n in group.members
                                                                         if n.conn == m.conn)):
                    live.append(m.member_id)
        return frozenset(live)

    def local_steps(self, s: int, p: Proc) -> tuple:
        """The running process's own steps, memoised per process value:
        ``(reply, heartbeat, scheduled, commit)``, each None or ``(Action, Proc')``:
        the next response handled, a heartbeat sent, a ScheduledRebalanceTimeout
        passing, an OffsetCommit sent (R41; with nothing else in flight, so the
        member keeps one request outstanding; ``successors`` offers it only while
        another live process owns some of the same partitions)."""
        key = (s, p)
        hit = self._local.get(key)
        if hit is not None:
            return hit
        reply = heartbeat = scheduled = commit = None
        c = p.consumer
        if p.responses:
            resp = p.responses[0]
            c2, outs = self.step_member(c, resp)
            same = c2.owned == c.owned and c2.generation == c.generation
            reply = (Action("reply", s, resp),
                     Proc(RUNNING, p.epoch, c2, p.requests + self.requests_of(outs), p.responses[1:],
                          _masked(p.shared, c2.owned), p.committed and same, p.stage, p.metadata,
                          restored(p, c, c2), p.quiet, restarting(p, c, c2)))
        elif not p.requests:
            c2, outs = self.step_member(c, HeartbeatDue())
            sent = self.requests_of(outs)
            if sent:
                heartbeat = (Action("heartbeat", s, sent[0]), p._replace(consumer=c2, requests=sent))
            if c.scheduled == 0:
                due = ScheduledRebalanceDue()
                c2, outs = self.step_member(c, due)
                if c2 != c:
                    scheduled = (Action("scheduled", s, due),
                                 p._replace(consumer=c2, requests=self.requests_of(outs)))
            if not p.committed:
                sent = self.requests_of(self.step_member(c, COMMIT_DUE)[1])
                if sent:
                    commit = (Action(COMMIT, s, sent[0]), p._replace(requests=sent, committed=True))
        hit = self._local[key] = (reply, heartbeat, scheduled, commit) + self._streams_steps(s, p)
        return hit

    def _streams_steps(self, s: int, p: Proc) -> tuple:
        """Streams (seed 001): a learner of the member becoming ready, one step per task
        (R55; nondeterministic: restores take any time, between rounds: the member
        idle), and a leaving member shutting down (R54: assigned no active task, or
        its scale-down timeout passed): it sends LeaveGroup and its process ends."""
        c = p.consumer
        st = c.streams
        if not st:
            return ()
        out = []
        idle = not (p.requests or p.responses)
        # R60: under KIP-441's assignor a warmup restores in the background, rebalance or not (it sends nothing)
        if (idle and c.phase == MemberPhase.STABLE and not c.heartbeat_inflight
                or self.cfg.assignor == "high-availability"):
            for t in partitions_of(st.learning & ~st.ready):
                event = LearnerReady(t)
                c2, outs = self.step_member(c, event)
                out.append((Action(READY, s, event), p._replace(consumer=c2, requests=p.requests + self.requests_of(outs),
                                                                restored=p.restored | 1 << t)))
        if shutting_down(self.cfg, c, idle):
            outs = self.step_member(c, Leave())[1]
            out.append((Action(SHUTDOWN, s, None), Proc(ABSENT, p.epoch, None, p.requests + self.requests_of(outs), (),
                                                        stage=p.stage, metadata=p.metadata, quiet=self.went_quiet(p))))
        return tuple(out)

    def successors(self, state: State) -> list:
        """``[(Action, State), ...]`` in a fixed order."""
        out = []
        group, procs, left = state.group, state.procs, state.faults_left
        for s, p in enumerate(procs):
            if p.requests:
                action, event, popped = self.delivery(s, p)
                g2, replies = self.coord(group, event)
                ps = list(procs)
                ps[s] = self.heard(group, s, popped, event.request) if self.static else popped
                self.route(ps, replies)
                nxt = State(g2, tuple(ps), left)
                if type(event.request) is OffsetCommit:
                    nxt = self._committed(state, nxt, s, event)
                out.append((action, nxt))
            if p.status != RUNNING:
                continue
            reply, heartbeat, scheduled, commit, *streams_steps = self.own_steps(group, s, p)
            if commit is not None and not _overlapping(procs, s):
                commit = None  # R41: a commit no other owner shares changes nothing any property sees
            for step in (reply, heartbeat, scheduled, commit):
                if step is not None:
                    ps = procs[:s] + (step[1],) + procs[s + 1:]
                    if step is reply:
                        ps = _released(ps, s, step[1].consumer.owned)
                    out.append((step[0], State(group, ps, left)))
            out.extend((a, _with_proc(state, s, q, 0)) for a, q in streams_steps)
        out.extend(self.timer_successors(state))
        out.extend(self.tick_successors(state))
        out.extend(self.fault_successors(state))
        return out

    def heard(self, group: Group, s: int, p: Proc, request) -> Proc:
        """Static slot ``s``'s process ``p`` once the coordinator has ``request`` from it
        (``Proc.quiet`` and ``Proc.restarting``): its first request restarts it within
        the session timeout if it is a JoinGroup with no member id and the slot's
        group.instance.id reaching a Stable group from a running (not paused) process,
        while (timed) the coordinator last
        heard from the slot less than session.timeout.ms ago or (untimed, R21) still
        holds the old member's record."""
        if s not in self.static:
            return p
        if p.restarting == FRESH:
            within = (type(request) is JoinGroup and request.member_id == NO_MEMBER_ID and request.group_instance_id
                      and p.status == RUNNING and group.phase == Phase.STABLE
                      and (p.quiet < self.timing.session_ticks if self.timing else any(
                          m.instance_id == request.group_instance_id for m in group.members)))
            p = p._replace(restarting=RESTARTING if within else NOT_RESTARTING)
        return p._replace(quiet=0) if p.quiet else p

    def went_quiet(self, p: Proc) -> int:
        """``Proc.quiet`` of a slot whose process ``p`` stops: kept if it was Stable,
        else the session timeout (no restart of it counts as KIP-345's: a member that
        went down mid-rebalance, owing a SyncGroup, is rightly expelled by the
        pending-sync timeout before its session lapses, R12; KAFKA-12890)."""
        if self.timing is None or p.consumer is None or p.consumer.phase == MemberPhase.STABLE:
            return p.quiet
        return self.timing.session_ticks

    @staticmethod
    def delivery(s: int, p: Proc) -> tuple:
        """The head request of slot ``s``'s channel taken off for the coordinator:
        ``(Action, Receive event, p without that request)``; the coordinator's
        replies are then routed (``route``), an OffsetCommit recorded (``_committed``)."""
        req = p.requests[0]
        popped = Proc(p.status, p.epoch, p.consumer, p.requests[1:], p.responses, p.shared, p.committed,
                      p.stage, p.metadata, p.restored, p.quiet, p.restarting, p.joining)
        return Action("deliver", s, req), Receive(connection(s, p.epoch), req), popped

    def own_steps(self, group: Group, s: int, p: Proc) -> tuple:
        """``local_steps`` of slot ``s``'s running process in ``group``, but for a
        heartbeat the coordinator would answer NONE without changing anything (a
        stutter): None in its place."""
        steps = self.local_steps(s, p)
        heartbeat = steps[1]
        if heartbeat is not None:
            event = self.heartbeat_event(s, p, heartbeat)
            if event is not None and self.timing is not None:
                # one that only restarts the session is taken when the session would lapse
                if self.timed_stutters(group, event, timed.session_left(group, p.consumer.member_id, self.TIMERS)):
                    return steps[:1] + (None,) + steps[2:]
            elif event is not None and self.stutters(group, event):
                return steps[:1] + (None,) + steps[2:]
        return steps

    def timed_stutters(self, group: Group, event, due: int | None) -> bool:
        """Timed: whether heartbeat ``event`` is not taken now: it is answered NONE and the
        member's session (``due`` ticks left, None if not armed) would not lapse before the
        next tick, or it changes nothing at all."""
        g2, replies = self.coord(group, event)
        return replies[0].response.error == Error.NONE and (due is None or due > 1 or g2 == group)

    @staticmethod
    def heartbeat_event(s: int, p: Proc, heartbeat: tuple) -> Receive:
        """The coordinator's input for a ``local_steps`` heartbeat of slot ``s``'s process."""
        return Receive(connection(s, p.epoch), heartbeat[0].detail)

    def _committed(self, state: State, nxt: State, s: int, event: Receive) -> State:
        """R41: record in slot ``s``'s ``shared`` the partitions of its OffsetCommit
        that the coordinator accepted (by the model's rule, R9) while another live
        process also owned them, per that process's slot."""
        if self.coord(state.group, event)[1][0].response.error != Error.NONE:
            return nxt
        p = nxt.procs[s]
        if p.consumer is None:
            return nxt
        mine = event.request.partitions & p.consumer.owned
        q = recorded(p, tuple(mine & q.consumer.owned if t != s and (q.status == RUNNING or q.status == PAUSED)
                              else 0 for t, q in enumerate(nxt.procs)))
        return nxt if q is p else _with_proc(nxt, s, q, 0)

    def tick_successors(self, state: State) -> list:
        """R38: one tick passes (timed: ``timed_tick``), between rounds only (the group Stable, no message in
        flight but responses a paused process has yet to read: its pause is real
        time passing, ``clock_runs``) and only while some running member's
        ScheduledRebalanceTimeout counts down; it counts each of them down."""
        if self.timing is not None:
            return self.timed_tick(state)
        if not clock_runs(state) or not any(map(ticks, state.procs)):
            return []
        procs = tuple(p._replace(consumer=self.step_member(p.consumer, TICK)[0]) if ticks(p) else p
                      for p in state.procs)
        return [(Action("tick", -1, None), State(state.group, procs, state.faults_left))]

    def timer_successors(self, state: State) -> list:
        """R21: an armed coordinator timer fires once every member it waits for is
        silent (a live member would have heartbeated, rejoined or synced in time).
        Timed: once its deadline has come (checker/timed.py), whoever it waits for."""
        if self.timing is not None:
            return [(Action("timer", -1, ev), self.coordinator_event(state, ev))
                    for ev in timed.due(state.group, self.TIMERS)]
        armed = self._timers.get(state.group)
        if armed is None:
            armed = self._timers[state.group] = tuple(self.armed_timers(state.group))
        live = self.live_members(state)
        return [(Action("timer", -1, ev), self.coordinator_event(state, ev))
                for ev, waiting in armed if live.isdisjoint(waiting)]

    def fault_successors(self, state: State) -> list:
        """The environment's actions (spec/SPEC.md section 6): resume and a rolling
        upgrade's bounces (free) and, within the budget, join, leave, crash, restart and
        pause. Timed, each one leaves a rebalance under way unjudged by
        ``bounded_rebalance`` (``timed.faulted``)."""
        out = self._environment(state)
        if self.timing is not None:
            out = [(a, n._replace(group=timed.faulted(n.group))) for a, n in out]
        return out

    def timed_tick(self, state: State) -> list:
        """The timed mode's clock (checker/timed.py): one tick passes when nothing is
        urgent (no timer due, no message in flight but responses a paused process has
        yet to read, no running member's own heartbeat or ScheduledRebalanceTimeout
        due); it counts every armed timer down, the members' countdowns (R38), each
        static slot's ``quiet`` and the rebalance's age. ``[(Action, State)]``, at
        most one; none when nothing would change."""
        group = state.group
        if timed.due(group, self.TIMERS) or any(p.requests or p.responses and p.status != PAUSED
                                                for p in state.procs):
            return []
        for s, p in enumerate(state.procs):
            if p.status == RUNNING and any(self.own_steps(group, s, p)[1:3]):
                return []
        procs = tuple(self.aged(s, p) for s, p in enumerate(state.procs))
        nxt = State(timed.ticked(self.timing, group), procs, state.faults_left)
        return [(Action("tick", -1, None), nxt)] if nxt != state else []

    def aged(self, s: int, p: Proc) -> Proc:
        """Slot ``s``'s process ``p`` one tick later (``timed_tick``): its countdowns (R38) and,
        for a static slot, ``quiet``."""
        return p._replace(consumer=self.step_member(p.consumer, TICK)[0] if self.ticks(p) else p.consumer,
                          quiet=min(p.quiet + 1, self.timing.session_ticks) if s in self.static else p.quiet)

    def _environment(self, state: State) -> list:
        out = self.upgrade_successors(state) if self.stages else []
        for s, p in enumerate(state.procs):
            out.extend((a, _with_proc(state, s, q, cost))
                       for a, q, cost in self.slot_environment(s, p) if cost <= state.faults_left)
        if state.faults_left > 0:
            out.extend(self._kip345_faults(state))
        if state.faults_left > 0 and {CREATE_TOPIC, DELETE_CONNECTOR} & self.faults and between_rounds(state) and \
                not any(p.status == PAUSED for p in state.procs):
            existing = state.procs[0].metadata
            if CREATE_TOPIC in self.faults:
                out.extend(self._metadata_changed(state, CREATE_TOPIC, existing | 1 << t)
                           for t in partitions_of(self.cfg.created_topics & ~existing))
            if DELETE_CONNECTOR in self.faults:
                out.extend(self._metadata_changed(state, DELETE_CONNECTOR, existing & ~(1 << (i + 1)))
                           for i in partitions_of(self.cfg.deletable_connectors) if existing >> (i + 1) & 1)
        return out

    @property
    def no_proc(self) -> Proc:
        """An empty slot whose processes will see the topics that exist at the start
        (all but ``cfg.created_topics``, R62)."""
        return NO_PROC._replace(metadata=~self.cfg.created_topics) if self.cfg.created_topics else NO_PROC

    def _metadata_changed(self, state: State, kind: str, topics: int) -> tuple:
        """The metadata every slot sees becomes ``topics`` (a topic bitmask), one fault:
        ``create-topic`` (R62), one of ``cfg.created_topics`` created, or
        ``delete-connector`` (R81), one of ``cfg.deletable_connectors`` deleted from
        Connect's config topic (its task topic gone). Between rounds and while no
        process is paused, so the leader acts on it at once; each running member's
        refresh sees it (``MetadataUpdate``). ``(Action, State)``."""
        event = MetadataUpdate(topics)
        procs = []
        for p in state.procs:
            p = p._replace(metadata=topics)
            if p.status == RUNNING:
                c2, outs = self.step_member(p.consumer, event)
                p = p._replace(consumer=c2, requests=p.requests + self.requests_of(outs))
            procs.append(p)
        return Action(kind, -1, event), State(state.group, tuple(procs), state.faults_left - 1)

    def upgrade_successors(self, state: State) -> list:
        """R79: the operator's rolling bounces, outside the fault budget. Once the previous
        rolling bounce is complete (model/upgrade.py ``bounce_ready``), a slot moves
        to the next assignor list: its running process, Stable with nothing in
        flight (the operator bounces a healthy member), shuts down gracefully (R20:
        revokes, sends LeaveGroup) and a new process starts at once on the new list,
        its JoinGroup behind the LeaveGroup on its connection (one channel per slot:
        the new process takes the LeaveGroupResponse and ignores it); a slot with no process (absent or
        crashed) gets the new list for its next start. A paused process waits.
        ``[(Action, State)]``."""
        path, procs = self.stages, state.procs
        slot_stages = [p.stage for p in procs]
        out = []
        for s, p in enumerate(procs):
            if p.status == PAUSED or not upgrade.bounce_ready(path, slot_stages, p.stage, state.group.protocol):
                continue
            nxt = p._replace(stage=p.stage + 1)
            if p.status == RUNNING:
                c = p.consumer
                if c.phase != MemberPhase.STABLE or c.heartbeat_inflight or p.requests or p.responses:
                    continue
                left = self.requests_of(self.step_member(c, Leave())[1])
                nxt = self.start(s, nxt)
                nxt = nxt._replace(requests=left + nxt.requests)
            out.append((Action(UPGRADE, s, None), _with_proc(state, s, nxt, 0)))
        return out

    def _kip345_faults(self, state: State) -> list:
        """KIP-345's faults that act on the group (R71, R72), each spending one fault:
        ``remove``, an admin client's batch LeaveGroup naming a static member of the
        group by group.instance.id (seed 002, "Admin request"; from a connection of its
        own, whose reply no process reads); ``failover``, the coordinator resumes from
        its stored record and everything in flight is lost: every live member sees its
        connection break (or NOT_COORDINATOR) and retries (model/failover.py,
        model/member.py ``_coordinator_lost``)."""
        out = []
        group = state.group
        if REMOVE in self.faults:
            for s in sorted(self.static):
                iid = self.instance_of(s)
                if coordinator.find_instance(group, iid) is not None:
                    req = LeaveGroup(((NO_MEMBER_ID, iid),))
                    nxt = self.coordinator_event(state, Receive(connection(s, ADMIN_EPOCH), req))
                    procs = nxt.procs[:s] + (_interrupted(nxt.procs[s]),) + nxt.procs[s + 1:]
                    out.append((Action(REMOVE, s, req), State(nxt.group, procs, state.faults_left - 1)))
        if FAILOVER in self.faults and group.phase != Phase.DEAD:
            out.append((Action(FAILOVER, -1, None), self._failed_over(state)))
        return out

    def _failed_over(self, state: State) -> State:
        """R72: the coordinator loaded from its record; every request and response in
        flight dropped; each live member handles the loss (its retry goes out)."""
        procs = []
        for p in state.procs:
            if p.status == RUNNING or p.status == PAUSED:
                c, outs = self.step_member(p.consumer, COORDINATOR_LOST)
                p = p._replace(consumer=c, requests=self.requests_of(outs), responses=())
            elif p.requests:
                p = p._replace(requests=())
            procs.append(_interrupted(p))
        return State(failover.load(self.cfg, state.group), tuple(procs), state.faults_left - 1)

    def churn_successors(self, state: State) -> list:
        """R39: leader changes outside the budget (checker/engines/churn.py): between rounds
        (the group Stable, nothing in flight) the leader's process bounces, crashing
        and restarting at once under a new member id (needs the crash and restart
        faults). ``[(Action, State)]``, at most one."""
        if "crash" not in self.faults or "restart" not in self.faults or not between_rounds(state):
            return []
        leader = state.group.leader
        for s, p in enumerate(state.procs):
            if p.status == RUNNING and p.consumer.member_id == leader != NO_MEMBER_ID:
                return [(Action(BOUNCE, s, None), _with_proc(state, s, self.start(s, p), 0))]
        return []

    def slot_environment(self, s: int, p: Proc) -> list:
        """The environment's steps that act on slot ``s`` alone, read from its process
        ``p`` alone: ``[(Action, Proc', faults spent), ...]``, its resume (free) if
        paused, then its faults (one each, taken only while the budget lasts)."""
        out = [(Action("resume", s, None), p._replace(status=RUNNING), 0)] if p.status == PAUSED else []
        out.extend((a, q, 1) for a, q in self._faults(s, p))
        return out

    def _faults(self, s: int, p: Proc) -> list:
        """Slot ``s``'s faults as ``[(Action, Proc'), ...]``: join, leave, crash,
        restart, pause, as enabled and applicable to its process."""
        out = []
        faults = self.faults
        if p.status == ABSENT and not p.requests and "join" in faults:
            out.append((Action("join", s, None), self.start(s, p)))
        elif p.status == RUNNING:
            if SUBSCRIBE in faults and not (p.requests or p.responses):  # R63: between its rounds
                for topics in self.cfg.resubscriptions:
                    c2, outs = self.step_member(p.consumer, Subscribe(topics))
                    if c2 != p.consumer:
                        out.append((Action(SUBSCRIBE, s, Subscribe(topics)),
                                    p._replace(consumer=c2, requests=self.requests_of(outs))))
            if "leave" in faults and self.cfg.streams:  # R53: the scale-down tool marks it leaving soon
                c2, outs = self.step_member(p.consumer, ScaleDown())
                if c2 != p.consumer:
                    out.append((Action(SCALE_DOWN, s, None), p._replace(consumer=c2, requests=self.requests_of(outs))))
            elif "leave" in faults:
                c2, outs = self.step_member(p.consumer, Leave())
                out.append((Action("leave", s, None),
                            Proc(ABSENT, p.epoch, None, p.requests + self.requests_of(outs), (), stage=p.stage,
                                 metadata=p.metadata, quiet=self.went_quiet(p))))
            if "pause" in faults:
                # a restarted process that pauses may rightly be expelled before it is Stable: its restart is no
                # longer judged (static_restart_no_rebalance)
                out.append((Action("pause", s, None), p._replace(
                    status=PAUSED, restarting=NOT_RESTARTING if p.restarting in (RESTARTING, KEPT) else p.restarting)))
        elif p.status == CRASHED and "restart" in faults:
            out.append((Action("restart", s, None), self.start(s, p)))
        if p.status == CRASHED and DOWNGRADE in faults and s in self.static:
            # R73: the static member's process restarts without group.instance.id (KIP-345's downgrade)
            out.append((Action(DOWNGRADE, s, None), self.start(s, p, static=False)))
        if "crash" in faults and (p.status == RUNNING or p.status == PAUSED):
            out.append((Action("crash", s, None), Proc(CRASHED, p.epoch, None, (), (), stage=p.stage, metadata=p.metadata,
                                                       quiet=self.went_quiet(p))))
        return out


def stutters(group: Group, g2: Group, replies) -> bool:
    """Whether the coordinator's answer ``(g2, replies)`` to a heartbeat in ``group``
    changes nothing: the group kept, the answer NONE."""
    return g2 == group and replies[0].response.error == Error.NONE


def between_rounds(state: State) -> bool:
    """The group is Stable and nothing is in flight: where ticks pass (R38) and the
    leader may bounce (R39)."""
    return state.group.phase == Phase.STABLE and not any(p.requests or p.responses for p in state.procs)


def ticks(p: Proc) -> bool:
    """Whether a tick changes process ``p``: it runs and a timer of its counts down (R38)."""
    return p.status == RUNNING and counting(p.consumer)


def clock_runs(state: State) -> bool:
    """R38: where a tick may pass. As ``between_rounds``, except that responses in
    flight to a paused process do not hold time back: a paused process reads
    nothing however long it stays paused, while the running members' clocks go on
    (Kafka Connect's WorkerCoordinator and DistributedHerder time a scheduled
    rebalance on the worker's own clock, whatever another worker does)."""
    return state.group.phase == Phase.STABLE and not any(
        p.requests or p.responses and p.status != PAUSED for p in state.procs)


def processing(state: State):
    """The consumers of the live (running or paused) processes: those that process
    what they own."""
    for p in state.procs:
        if p.status == RUNNING or p.status == PAUSED:
            yield p.consumer


def _with_proc(state: State, s: int, proc: Proc, cost: int) -> State:
    """``state`` with slot ``s``'s process replaced, ``cost`` faults spent; other
    processes' ``shared`` forget what slot ``s`` no longer owns."""
    procs = state.procs
    procs = _released(procs[:s] + (proc,) + procs[s + 1:], s, proc.consumer.owned if proc.consumer else 0)
    return State(state.group, procs, state.faults_left - cost)


def _interrupted(p: Proc) -> Proc:
    """``p`` once a fault of the group's own (an admin's removal of its member, R71;
    a coordinator failover, R72) interrupts its restart: KIP-345 promises no
    rebalance for the member's restart alone, so the window of
    ``static_restart_no_rebalance`` ends (what the failover loses is finding F4's)."""
    return p._replace(restarting=NOT_RESTARTING) if p.restarting in (RESTARTING, KEPT) else p


def restarting(p: Proc, c: Consumer, c2: Consumer) -> int:
    """``Proc.restarting`` after process ``p``'s consumer went from ``c`` to ``c2``:
    a restart ends once the process is Stable (``KEPT``), and ``KEPT`` ends when it
    leaves Stable or its generation moves."""
    if p.restarting == RESTARTING and c2.phase == MemberPhase.STABLE:
        return KEPT
    if p.restarting == KEPT and (c2.phase != MemberPhase.STABLE or c2.generation != c.generation):
        return NOT_RESTARTING
    return p.restarting


def restored(p: Proc, c: Consumer, c2: Consumer) -> int:
    """R55: ``Proc.restored`` after process ``p``'s consumer went from ``c`` to ``c2``
    handling a response: the tasks it still learns whose restore had finished, and
    those it now learns where it ran the standby (a learner placed there is ready
    at once; KIP-441's caught-up standby, R57)."""
    if not c.streams:
        return p.restored
    return (p.restored | c.streams.standby) & c2.streams.learning


def recorded(p: Proc, added: tuple) -> Proc:
    """R41: process ``p`` with ``added[t]`` (a partition bitmask per client slot)
    added to what it records it shares with slot ``t``; ``p`` itself if that
    records nothing new."""
    shared = tuple(a | b for a, b in zip(p.shared or (0,) * len(added), added))
    shared = shared if any(shared) else ()
    return p if shared == p.shared else p._replace(shared=shared)


def _overlapping(procs: tuple, s: int) -> bool:
    """Whether slot ``s``'s consumer owns a partition another live process owns."""
    mine = procs[s].consumer.owned
    return any(t != s and (q.status == RUNNING or q.status == PAUSED) and q.consumer.owned & mine
               for t, q in enumerate(procs))


def _masked(shared: tuple, owned: int) -> tuple:
    """``Proc.shared`` for what is still ``owned``."""
    if not shared:
        return shared
    shared = tuple(x & owned for x in shared)
    return shared if any(shared) else ()


def _released(procs: tuple, s: int, owned: int) -> tuple:
    """``procs`` with every other process's ``shared`` for slot ``s`` cut to what
    slot ``s`` still ``owned``s (R41: an overlap ends when either side lets go)."""
    if not any(q.shared and q.shared[s] & ~owned for q in procs):
        return procs
    out = list(procs)
    for t, q in enumerate(procs):
        if q.shared and q.shared[s] & ~owned:
            shared = list(q.shared)
            shared[s] &= owned
            out[t] = q._replace(shared=tuple(shared) if any(shared) else ())
    return tuple(out)


def queue_changes(before: State, action: Action | None, after: State):
    """What a step did to each slot's channels: yields ``(slot, dropped, new_requests,
    new_responses)`` where ``dropped`` is "all" (a new or dead connection: nothing
    in flight survives), "responses" (the process left: replies to it are lost) or
    None, and the counts are messages appended by this step."""
    for s, (p0, p1) in enumerate(zip(before.procs, after.procs)):
        popped_req = action is not None and action.kind == "deliver" and action.slot == s
        popped_resp = action is not None and action.kind == "reply" and action.slot == s
        dropped = None
        if p1.epoch != p0.epoch or (p1.status != p0.status and p1.status == CRASHED):
            dropped = "all"
        elif p1.status != p0.status and p1.status == ABSENT:
            dropped = "responses"
        new_req = len(p1.requests) - (0 if dropped == "all" else len(p0.requests) - popped_req)
        new_resp = len(p1.responses) - (0 if dropped else len(p0.responses) - popped_resp)
        yield s, dropped, max(new_req, 0), max(new_resp, 0)


class SendOrder:
    """Tracks, along one execution, the order in which the messages in flight were
    sent: ``head(kind, slot)`` is the sequence number of the oldest message on a
    channel (kind "deliver": requests, "reply": responses), ``tag`` names it."""

    def __init__(self, initial: State, tag=None):
        self.queues = {(k, s): [] for k in ("deliver", "reply") for s in range(len(initial.procs))}
        self.count = 0
        self.step(State(initial.group, tuple(NO_PROC for _ in initial.procs), 0), None, initial, tag)

    def step(self, before: State, action: Action | None, after: State, tag=None) -> object:
        """Record a step; returns the tag of the message it delivered (None if none)."""
        delivered = None
        if action is not None and action.kind in ("deliver", "reply"):
            q = self.queues[(action.kind, action.slot)]
            delivered = q.pop(0) if q else None
            delivered = delivered and delivered[1]
        for s, dropped, new_req, new_resp in queue_changes(before, action, after):
            if dropped == "all":
                self.queues[("deliver", s)].clear()
            if dropped:
                self.queues[("reply", s)].clear()
            for kind, n in (("deliver", new_req), ("reply", new_resp)):
                for _ in range(n):
                    self.count += 1
                    self.queues[(kind, s)].append((self.count, tag))
        return delivered

    def head(self, kind: str, slot: int) -> int | None:
        q = self.queues.get((kind, slot))
        return q[0][0] if q else None


def build(cfg: GroupConfig, *args, **kwargs) -> System:
    """The System for ``cfg``'s protocol, from ``System``'s arguments: KIP-848's consumer
    protocol is explored as checker/consumer_system.py's ConsumerSystem, its online migration
    as checker/migration_system.py's MigrationSystem."""
    if cfg.protocol == KIP848 and cfg.migration:  # KIP-848's online migration
        from .migration_system import MigrationSystem
        return MigrationSystem(cfg, *args, **kwargs)
    if cfg.protocol == KIP848:
        from .consumer_system import ConsumerSystem
        return ConsumerSystem(cfg, *args, **kwargs)
    return System(cfg, *args, **kwargs)


SCHEDULE_LIMIT = 10_000


class Storm(RuntimeError):
    """The deterministic schedule of ``settle`` did not settle: ``start``, the state it
    began from, and ``trace``, its steps ``[(Action, State), ...]``."""

    def __init__(self, start: State, trace: list):
        super().__init__(f"the group did not settle within {SCHEDULE_LIMIT} steps")
        self.start, self.trace = start, trace


def settle(system: System, state: State, trace: list | None = None, timers: bool = True) -> State:
    """Run the deterministic schedule until nothing but faults is enabled: the
    network delivers messages in the order they were sent (oldest first, across
    all connections); heartbeats come when no message is in flight, then timers.
    With ``timers=False`` no timer fires (the group settles within its deadlines).
    Appends ``(Action, State)`` to ``trace`` if given. Raises ``Storm`` (a
    RuntimeError, with the schedule's steps) if it does not settle within
    SCHEDULE_LIMIT steps (a livelock in the model)."""
    start, steps = state, []
    order = SendOrder(state)
    # messages in send order, then the members' own steps (heartbeats, KIP-848's reconciliation stages)
    rank = {"deliver": 0, "reply": 0, RECONCILE: 1, RELEASE: 1, "heartbeat": 1}
    if timers:
        rank.update(timer=2, scheduled=2, tick=3)  # time passes when nothing else is left
    for _ in range(SCHEDULE_LIMIT):
        nexts = [(a, n) for a, n in system.successors(state._replace(faults_left=0)) if a.kind in rank]
        if not nexts:
            if trace is not None:
                trace.extend(steps)
            return state
        action, nxt = min(nexts, key=lambda an: (rank[an[0].kind], order.head(an[0].kind, an[0].slot) or 0))
        nxt = nxt._replace(faults_left=state.faults_left)
        order.step(state, action, nxt)
        state = nxt
        steps.append((action, state))
    raise Storm(start, steps)
