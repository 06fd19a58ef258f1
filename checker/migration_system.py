"""The closed system of KIP-848's online migration (``group.migration``): one coordinator whose
group is a classic ``Group`` or a ``ConsumerGroup`` (model/consumer_group/migration.py
``handle``), client processes of both protocols, one FIFO channel per connection, a fault
budget: checker/consumer_system.py's system with each step taken by the handler of the
process's own protocol.

Client slots ``0..cfg.migration-1`` start processes that speak the classic protocol (the
cooperative protocol's members, model/member.py), the others the consumer protocol
(model/consumer_group/membership.py); the group starts classic and empty. A slot's protocol
is its ``Proc.stage`` (``CLASSIC`` or ``CONSUMER``): a ``join`` starts its next process on
the same protocol, a ``restart`` (after a crash) on the other one, as a rolling upgrade
moves a process to group.protocol=consumer and its rollback moves it back. A
consumer-protocol process's member id is ``member_id(slot, KIP848_IDS | process epoch)``,
apart from the ids the coordinator hands out to classic members.

Each process's own steps and faults are those of its protocol's system (checker/system.py
for a classic one, checker/consumer_system.py for a consumer one); the coordinator's timers
are those its group arms (model/consumer_group/migration.py ``armed_timers``).
"""
from __future__ import annotations

from rebalance.model.consumer_group import migration
from rebalance.model.consumer_group.group import find
from rebalance.model.consumer_group.membership import NEW_MEMBERSHIP, Membership
from rebalance.model.consumer_group.messages import ConsumerGroupHeartbeat, Start as JoinConsumerGroup
from rebalance.model.coordinator import EMPTY_GROUP, Group
from rebalance.model.member import NEW_CONSUMER, MemberPhase
from rebalance.model.protocol import KIP848_IDS, NO_INSTANCE_ID, NO_MEMBER_ID, Start, connection, member_id

from .consumer_system import ConsumerSystem
from .system import ABSENT, CRASHED, RUNNING, Proc, State, System, settle

CLASSIC, CONSUMER = 0, 1  # Proc.stage: the protocol a slot's processes speak


class MigrationSystem(ConsumerSystem):
    """``System`` for ``cfg.migration`` (same constructor)."""

    def coordinator_step(self, group, event) -> tuple:
        return migration.handle(self.cfg, group, event)

    member_handler = staticmethod(migration.client_handle)

    @staticmethod
    def armed_timers(group) -> list:
        return migration.armed_timers(group) if type(group) is Group else ConsumerSystem.armed_timers(group)

    def protocol_of(self, slot: int) -> int:
        """The protocol of ``slot``'s first process."""
        return CLASSIC if slot < self.cfg.migration else CONSUMER

    def start(self, slot: int, proc: Proc, static: bool = True) -> Proc:
        """A new process on ``slot``: on the slot's protocol, switched by a restart."""
        stage = 1 - proc.stage if proc.status == CRASHED else proc.stage
        epoch = proc.epoch + 1
        iid = self.instance_of(slot) if static else NO_INSTANCE_ID
        topics = self.cfg.subscription_of(slot)
        if stage == CLASSIC:
            c, out = self.step_member(NEW_CONSUMER, Start(iid, topics, proc.metadata))
        else:
            c, out = self.step_member(NEW_MEMBERSHIP, JoinConsumerGroup(member_id(slot, KIP848_IDS | epoch), iid,
                                                                        topics, self.cfg.regex))
        return Proc(RUNNING, epoch, c, self.requests_of(out), (), stage=stage)

    def started(self) -> State:
        procs = []
        for s in range(self.slots):
            none = Proc(ABSENT, 0, None, (), (), stage=self.protocol_of(s))
            procs.append(self.start(s, none) if s < self.members else none)
        return State(EMPTY_GROUP, tuple(procs), self.max_faults)

    def initial(self) -> State:
        return self.start_state if self.start_state is not None else settle(self, self.started())

    # -- who is live (R21) ---------------------------------------------------------------
    @staticmethod
    def speaker(s: int, p: Proc):
        if type(p.consumer) is Membership:
            return ConsumerSystem.speaker(s, p)
        return System.speaker(s, p)

    @staticmethod
    def speaks_for(group, s: int, p: Proc) -> frozenset:
        """As the process's own protocol says; a classic process in a consumer group speaks for
        its member, or, joining without a member id, for the members its connection joined."""
        c = p.consumer
        if type(c) is Membership:
            return ConsumerSystem.speaks_for(group, s, p)
        if type(group) is Group:
            return System.speaks_for(group, s, p)
        if p.status != RUNNING or c.phase == MemberPhase.LEFT:
            return frozenset()
        if c.member_id == NO_MEMBER_ID:
            conn = connection(s, p.epoch)
            return frozenset(m.member_id for m in group.members if m.classic and m.classic[0] == conn)
        return frozenset((c.member_id,)) if find(group, c.member_id) is not None else frozenset()

    # -- the processes' own steps, by protocol -----------------------------------------------
    def local_steps(self, s: int, p: Proc) -> tuple:
        if type(p.consumer) is Membership:
            return ConsumerSystem.local_steps(self, s, p)
        return System.local_steps(self, s, p)

    def heartbeat_event(self, s: int, p: Proc, heartbeat: tuple):
        if type(p.consumer) is Membership:
            return ConsumerSystem.heartbeat_event(self, s, p, heartbeat)
        return System.heartbeat_event(s, p, heartbeat)

    def stutters(self, group, event) -> bool:
        if type(event.request) is ConsumerGroupHeartbeat:
            return ConsumerSystem.stutters(self, group, event)
        return System.stutters(self, group, event)

    # -- the environment ---------------------------------------------------------------------
    def _faults(self, s: int, p: Proc) -> list:
        """The faults of ConsumerSystem, each process keeping its slot's protocol (a restart
        switches it, in ``start``)."""
        return [(a, q if q.stage == p.stage or a.kind in ("join", "restart") else q._replace(stage=p.stage))
                for a, q in super()._faults(s, p)]

    def slot_environment(self, s: int, p: Proc) -> list:
        if type(p.consumer) is Membership:
            return ConsumerSystem.slot_environment(self, s, p)
        return System.slot_environment(self, s, p)
