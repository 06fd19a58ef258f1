"""The closed system of KIP-848's consumer group protocol (``--protocol consumer``): the
consumer group coordinator (model/consumer_group/coordinator.py), one client membership
per slot (model/consumer_group/membership.py), one FIFO channel per connection, a fault
budget: the classic ``System`` with its actors replaced, explored by the same engines.

A member's own steps (each weakly fair): handle the next response, send a heartbeat
(when nothing is in flight on its connection; one the coordinator would answer NONE
changing nothing, for the member either, is a stutter and is not generated), run the
next stage of a reconciliation, rejoin once a fenced member's onPartitionsLost
completes, commit its offsets (only while another live process owns some of the same
partitions, as in the classic system). The coordinator's own events: the session and
rebalance timeouts (R21: only of silent members, whose process crashed, paused, left
or was replaced), and the resolution of regular expressions.

The environment: the classic faults (join, leave, crash, restart, pause; subscribe and
create-topic when named) and resume, which may find the paused member's heartbeat timed
out: its connection is reset, whatever was in flight lost, and it retries with a full
heartbeat (the lost response that the previous-epoch tolerance exists for).

Timed (checker/timed.py, docs/timed.md): each member's session and rebalance timeouts
fire at their deadlines (model/consumer_group/timing.py). Time waits for messages in
flight, a heartbeat that changes something or that the member owes before its session
lapses, and a reconciliation stage; a fenced member's onPartitionsLost and rejoin
(``release``) may take time. ``Proc.joining`` times each join (``joins_in_time``).
"""
from __future__ import annotations

from rebalance.model.consumer_group import coordinator as cg_coordinator, membership
from rebalance.model.consumer_group.timing import session_refreshed
from rebalance.model.consumer_group.group import empty_group, find
from rebalance.model.consumer_group.membership import IN_GROUP, NEW_MEMBERSHIP, Membership
from rebalance.model.consumer_group.messages import (
    ClientState, ConsumerGroupHeartbeatResponse, Reconcile, Release, RequestTimeout, Start, TopicsChanged,
)
from rebalance.model.protocol import (
    NO_INSTANCE_ID, Error, HeartbeatDue, Leave, Receive, Subscribe, member_id, partitions_of,
)

from . import timed
from .system import (
    ABSENT, COMMIT, COMMIT_DUE, CREATE_TOPIC, CRASHED, PAUSED, RECONCILE, RELEASE, RUNNING, SUBSCRIBE, Action, Proc,
    State, System, _masked, _with_proc, settle,
)

HEARTBEAT_DUE = HeartbeatDue()
LIVE_STATES = IN_GROUP + (ClientState.JOINING,)
RECONCILE_STEP = Reconcile()
RELEASE_STEP = Release()
REQUEST_TIMEOUT = RequestTimeout()
TIMEOUT = "timeout"  # a resume's detail when the paused member's heartbeat timed out


class ConsumerSystem(System):
    """``System`` for ``cfg.protocol == "consumer"`` (same constructor; KIP-345's faults
    and rolling upgrades do not apply)."""

    TIMERS = timed.CONSUMER

    def coordinator_step(self, group, event) -> tuple:
        """The consumer group coordinator's handler; timed, with the deadlines its step starts,
        keeps and cancels (model/consumer_group/timing.py ``rearm``)."""
        g2, replies = cg_coordinator.handle(self.cfg, group, event)
        if self.timing is not None:
            if type(event) is Receive:
                g2 = timed.stepped(self.timing, group, g2, session_refreshed(event, replies), timers=timed.CONSUMER)
            else:
                g2 = timed.stepped(self.timing, group, g2, None, fired=event, timers=timed.CONSUMER)
        return g2, replies

    member_handler = staticmethod(membership.handle)

    def joined(self, p: Proc) -> Proc:
        """Timed: ``p`` with ``joining`` kept (``Proc.joining``): set (1) once its member sends a
        heartbeat at epoch 0, kept while it is refused and rejoins, 0 once a response gives it a
        member epoch or it stops trying (FATAL, left, gone)."""
        if self.timing is None:
            return p
        c = p.consumer
        if c is None or c.state == ClientState.FATAL or c.state == ClientState.UNSUBSCRIBED or c.epoch > 0:
            j = 0
        elif c.state == ClientState.JOINING and c.inflight:
            j = p.joining or 1
        else:
            j = p.joining
        return p if j == p.joining else p._replace(joining=j)

    def aged(self, s: int, p: Proc) -> Proc:
        """One tick later: a running process's join one tick older (capped past the session)."""
        if p.joining and p.status == RUNNING:
            return p._replace(joining=min(p.joining + 1, self.timing.session_ticks + 2))
        return p

    def timed_stutters(self, group, event, due) -> bool:
        """Timed: a heartbeat that tells nobody anything (``stutters``, the deadlines aside) is
        taken only when the member's session (``due`` ticks left) would lapse before the next tick."""
        g2, replies = self.coord(group, event)
        r = replies[0].response
        quiet = (g2._replace(clock=group.clock) == group and r.error == Error.NONE and r.assignment is None
                 and r.member_epoch == event.request.member_epoch)
        return quiet and (due is None or due > 1 or g2 == group)

    @staticmethod
    def armed_timers(group) -> list:
        """The coordinator's timers (cg_coordinator.armed_timers) and, while a member's
        regular expression is unresolved, its asynchronous resolution (waiting for nobody)."""
        armed = cg_coordinator.armed_timers(group)
        if any(m.regex and not m.resolved for m in group.members):
            armed.append((cg_coordinator.RegexResolved(), ()))
        return armed

    @staticmethod
    def ticks(p: Proc) -> bool:
        return False  # no member deadline counts down in ticks

    def start(self, slot: int, proc: Proc, static: bool = True) -> Proc:
        """A new process on ``slot``: its member id generated from its process epoch
        (KIP-1082), subscribing as the slot's subscription (R61) says."""
        epoch = proc.epoch + 1
        iid = self.instance_of(slot) if static else NO_INSTANCE_ID
        c, out = self.step_member(NEW_MEMBERSHIP, Start(member_id(slot, epoch), iid, self.cfg.subscription_of(slot),
                                                        self.cfg.regex))
        return self.joined(Proc(RUNNING, epoch, c, self.requests_of(out), ()))

    def started(self) -> State:
        none = self.no_proc
        procs = tuple(self.start(s, none) if s < self.members else none for s in range(self.slots))
        return State(empty_group(self.cfg), procs, self.max_faults)

    def initial(self) -> State:
        if self.timing is not None:  # the untimed settled group, its deadlines started (System.initial)
            return super().initial()
        return self.start_state if self.start_state is not None else settle(self, self.started())

    @property
    def no_proc(self) -> Proc:
        return Proc(ABSENT, 0, None, (), ())

    # -- who is live (R21) -------------------------------------------------------------
    @staticmethod
    def speaker(s: int, p: Proc):
        c = p.consumer
        if p.status != RUNNING or c.state not in LIVE_STATES:
            return None
        if c.refused and not any(type(r) is ConsumerGroupHeartbeatResponse and r.error == Error.NONE
                                 for r in p.responses):
            return None  # refused, and no heartbeat of its accepted since
        return c.member_id

    @staticmethod
    def speaks_for(group, s: int, p: Proc) -> frozenset:
        """The member id of slot ``s``'s running process while its heartbeats are accepted, each
        re-arming its session timeout: in the group or joining, but not since a heartbeat of its
        was refused until one is accepted again (its response in flight, or read), nor once it
        left or gave up (FATAL)."""
        mid = ConsumerSystem.speaker(s, p)
        return frozenset() if mid is None or find(group, mid) is None else frozenset((mid,))

    # -- the members' own steps ----------------------------------------------------------
    def local_steps(self, s: int, p: Proc) -> tuple:
        """``(reply, heartbeat, reconcile, commit, release)``, each None or ``(Action, Proc')``
        (module docstring), memoised per process value."""
        key = (s, p)
        hit = self._local.get(key)
        if hit is not None:
            return hit
        reply = heartbeat = reconcile = commit = release = None
        c = p.consumer
        if p.responses:
            resp = p.responses[0]
            c2, outs = self.step_member(c, resp)
            reply = (Action("reply", s, resp), self.joined(p._replace(
                consumer=c2, requests=p.requests + self.requests_of(outs), responses=p.responses[1:],
                shared=_masked(p.shared, c2.owned), committed=p.committed and c2.epoch == c.epoch
                and c2.owned == c.owned)))
        elif not p.requests:
            c2, outs = self.step_member(c, HEARTBEAT_DUE)
            sent = self.requests_of(outs)
            if sent:
                heartbeat = (Action("heartbeat", s, sent[0]), self.joined(p._replace(consumer=c2, requests=sent)))
            if not p.committed:
                sent = self.requests_of(self.step_member(c, COMMIT_DUE)[1])
                if sent:
                    commit = (Action(COMMIT, s, sent[0]), p._replace(requests=sent, committed=True))
        if membership.reconcilable(c):
            c2, _ = self.step_member(c, RECONCILE_STEP)
            reconcile = (Action(RECONCILE, s, None), p._replace(consumer=c2, shared=_masked(p.shared, c2.owned),
                                                                committed=p.committed and c2.owned == c.owned))
        if c.state == ClientState.FENCED:
            c2, outs = self.step_member(c, RELEASE_STEP)
            release = (Action(RELEASE, s, None), self.joined(p._replace(
                consumer=c2, requests=p.requests + self.requests_of(outs), shared=_masked(p.shared, c2.owned),
                committed=False)))
        hit = self._local[key] = (reply, heartbeat, reconcile, commit) + ((release,) if release else ())
        return hit

    def heartbeat_event(self, s: int, p: Proc, heartbeat: tuple):
        """The coordinator's input for a heartbeat of slot ``s``'s process, or None when sending
        it changes the member beyond having it in flight (it reports its subscription or owned
        partitions, or ends ACKNOWLEDGING): never a stutter."""
        c, after = p.consumer, heartbeat[1].consumer
        if after._replace(inflight=False) != c:
            return None
        return super().heartbeat_event(s, p, heartbeat)

    def stutters(self, group, event) -> bool:
        """A heartbeat whose answer changes nothing: the group kept, NONE, and the response
        tells the member nothing new (its epoch as sent, no assignment)."""
        g2, replies = self.coord(group, event)
        r = replies[0].response
        return (g2 == group and r.error == Error.NONE and r.assignment is None
                and r.member_epoch == event.request.member_epoch)

    # -- the environment -------------------------------------------------------------------
    @property
    def whole_environment(self) -> bool:
        return CREATE_TOPIC in self.faults

    def _faults(self, s: int, p: Proc) -> list:
        """Slot ``s``'s faults: join, leave, crash, restart, pause, subscribe (as enabled)."""
        out = []
        faults = self.faults
        if p.status == ABSENT and not p.requests and "join" in faults:
            out.append((Action("join", s, None), self.start(s, p)))
        elif p.status == RUNNING:
            c = p.consumer
            if SUBSCRIBE in faults and not (p.requests or p.responses):
                for topics in self.cfg.resubscriptions:
                    c2, outs = self.step_member(c, Subscribe(topics))
                    if c2 != c:
                        out.append((Action(SUBSCRIBE, s, Subscribe(topics)), p._replace(consumer=c2)))
            if "leave" in faults:
                c2, outs = self.step_member(c, Leave())
                out.append((Action("leave", s, None),
                            Proc(ABSENT, p.epoch, c2, p.requests + self.requests_of(outs), ())))
            if "pause" in faults:  # a paused process's join is not timed (its delay is its own)
                out.append((Action("pause", s, None), p._replace(status=PAUSED, joining=0)))
        elif p.status == CRASHED and "restart" in faults:
            out.append((Action("restart", s, None), self.start(s, p)))
        if "crash" in faults and (p.status == RUNNING or p.status == PAUSED):
            out.append((Action("crash", s, None), Proc(CRASHED, p.epoch, None, (), ())))
        return out

    def slot_environment(self, s: int, p: Proc) -> list:
        """Resume (free): as it was, or, if the coordinator answered its heartbeat meanwhile,
        with the heartbeat timed out (its connection reset: requests and responses in flight
        lost, and the member retries with a full heartbeat); then the slot's faults."""
        out = []
        if p.status == PAUSED:
            out.append((Action("resume", s, None), p._replace(status=RUNNING), 0))
            if p.consumer.inflight and any(type(r) is ConsumerGroupHeartbeatResponse for r in p.responses):
                c2, _ = self.step_member(p.consumer, REQUEST_TIMEOUT)
                out.append((Action("resume", s, TIMEOUT), p._replace(status=RUNNING, consumer=c2, requests=(),
                                                                     responses=()), 0))
        out.extend((a, q, 1) for a, q in self._faults(s, p))
        return out

    def fault_successors(self, state: State) -> list:
        out = []
        for s, p in enumerate(state.procs):
            out.extend((a, _with_proc(state, s, q, cost)) for a, q, cost in self.slot_environment(s, p)
                       if cost <= state.faults_left)
        if state.faults_left > 0 and CREATE_TOPIC in self.faults and not any(
                p.requests or p.responses for p in state.procs):
            out.extend(self._create_topic(state))
        return out

    def _create_topic(self, state: State) -> list:
        """create-topic (a fault, with nothing in flight): one of ``cfg.created_topics`` not
        yet there is created and the coordinator's metadata image shows it (R62)."""
        out = []
        existing = state.group.topics
        for t in partitions_of(self.cfg.created_topics & ~existing):
            event = TopicsChanged(existing | 1 << t)
            nxt = self.coordinator_event(state, event)
            out.append((Action(CREATE_TOPIC, -1, event), nxt._replace(faults_left=state.faults_left - 1)))
        return out

    def tick_successors(self, state: State) -> list:
        """Timed: the clock (``System.timed_tick``); untimed, no member deadline counts down in ticks."""
        return self.timed_tick(state) if self.timing is not None else []

    def churn_successors(self, state: State) -> list:
        return []
