"""A Kafka Streams member (seed 001) on real sockets: ``rebalance member --protocol streams``.

``StreamsMemberRuntime`` is a ``MemberRuntime`` whose model configuration is the
streams protocol and assignor (model/streams.py): the same member handler, the
leader's Streams assignor, the consumer protocol on the wire with the Streams
user data (impl/streams_wire.py, spec/STREAMS_WIRE.md) under the protocol name
``streams``. Besides the consumer's inputs it feeds the handler:

* ``LearnerReady(t)`` when the simulated restore of learner task ``t`` ends
  (R55): each learner not yet ready restores ``restore_ms`` of wall time (the
  state store's records over the restore rate), all of them at once; a learner
  the leader takes away stops restoring, and one placed where its standby ran
  is ready at once (the handler's own rule);
* ``Tick()`` every heartbeat interval while the scale-down countdown runs (R54:
  ``GroupConfig.scale_down_ticks`` are heartbeat intervals here);
* ``ScaleDown()`` from ``scale_down()`` (the scale-down tool, R53).

The member shuts itself down when the model says so (``model.member.shutting_down``,
R54): ``finished`` is then set, and the caller closes it (LeaveGroup).
``show(line)`` gets one line each time the active, learner (and which of them
are ready) or standby tasks change, or the member is marked leaving, in the
seed's task notation: ``<ISO time> S4(active: [T1], learning: [T3],
ready: [], standby: [T2])`` (a ``, leaving`` before the closing parenthesis once
marked); the line is shown before the step's requests go out, so lines of
several members ordered by time never show a task given before it was taken.
"""
from __future__ import annotations

import asyncio
import datetime

from rebalance.model.config import GroupConfig
from rebalance.model.member import counting, shutting_down
from rebalance.model.protocol import LearnerReady, ScaleDown, Tick, partitions_of
from rebalance.model.streams import task_names

from .member import MemberRuntime


class StreamsMemberRuntime(MemberRuntime):
    """One Streams instance. ``cfg``: its GroupConfig (protocol and assignor
    "streams", the tasks as the partitions of ``cfg.topics``' one topic, which
    need not exist on the broker); ``restore_ms``: how long a learner's restore
    takes, ms; ``show(line)``: the task lines; the rest as for MemberRuntime."""

    def __init__(self, bootstrap: str, group: str, cfg: GroupConfig, restore_ms: float, show, **kwargs):
        super().__init__(bootstrap, group, [name for name, _ in cfg.topics], "streams", mutations=cfg.mutations,
                         **kwargs)
        self.streams_cfg, self.restore_ms, self.show = cfg, restore_ms, show
        self.restores: dict = {}  # task -> its restore's asyncio.Task
        self.shown = None
        self.finished = asyncio.Event()
        self._ticker = None

    async def _configure(self, boot) -> GroupConfig:
        return self.streams_cfg

    async def start(self) -> None:
        await super().start()
        self._ticker = asyncio.create_task(self._ticks())

    async def scale_down(self) -> None:
        """The scale-down tool (R53): mark this member leaving soon; it rejoins to say so
        (a Stable member only, as the handler has it; before start nothing happens)."""
        if self.cfg is not None:
            await self._step(ScaleDown())

    async def close(self) -> None:
        for task in (self._ticker, *self.restores.values()):
            if task is not None:
                task.cancel()
        self.restores.clear()
        await super().close()

    @property
    def tasks(self) -> tuple:
        """``(active, learning, ready, standby, leaving)``: the bitmasks of tasks and the flag."""
        st = self.state.streams
        return (self.state.owned,) + ((st.learning, st.ready, st.standby, st.leaving) if st else (0, 0, 0, False))

    async def _step(self, event) -> None:
        await super()._step(event)
        if shutting_down(self.cfg, self.state, idle=True):  # R54; nothing is in flight between steps
            self.finished.set()

    def _stepped(self) -> None:
        tasks = self.tasks
        if tasks != self.shown:
            self.shown = tasks
            active, learning, ready, standby, leaving = tasks
            stamp = datetime.datetime.now().isoformat(timespec="microseconds")
            self.show(f"{stamp} {self.client_id}(active: {task_names(active)}, learning: {task_names(learning)}, "
                      f"ready: {task_names(ready)}, standby: {task_names(standby)}{', leaving' if leaving else ''})")
        restoring = tasks[1] & ~tasks[2]
        for t in list(self.restores):
            if not restoring >> t & 1:
                self.restores.pop(t).cancel()
        for t in partitions_of(restoring):
            if t not in self.restores:
                self.restores[t] = asyncio.create_task(self._restore(t))

    async def _restore(self, task: int) -> None:
        await asyncio.sleep(self.restore_ms / 1000)
        del self.restores[task]  # done: the step below must not cancel it
        await self._step(LearnerReady(task))

    async def _ticks(self) -> None:
        while True:
            await asyncio.sleep(self.heartbeat_ms / 1000)
            if counting(self.state):
                await self._step(Tick())
