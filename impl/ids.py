"""Kafka's member.id and group.instance.id strings as a member sees them, to and
from the model's ints: a member only copies the ids it is given, so any bijection
will do (model/protocol.py: the ids are opaque to the member handler). Used by the
member runtime (impl/member.py) and by conform's member side
(checker/conform/members.py), one table per member or per trace."""
from __future__ import annotations

from rebalance.model.protocol import NO_INSTANCE_ID, NO_MEMBER_ID


class Ids:
    """``member(name)`` / ``instance(name)``: the int for a string, allotted in order
    of first sight; ``member_names`` / ``instance_names``: the inverse maps. ``""``
    and None are the model's none (NO_MEMBER_ID, NO_INSTANCE_ID)."""

    def __init__(self):
        self.members, self.instances = {"": NO_MEMBER_ID}, {None: NO_INSTANCE_ID}
        self.member_names, self.instance_names = {NO_MEMBER_ID: ""}, {NO_INSTANCE_ID: None}

    def member(self, name: str) -> int:
        if name not in self.members:
            self.members[name] = len(self.members)
            self.member_names[self.members[name]] = name
        return self.members[name]

    def instance(self, name) -> int:
        if name not in self.instances:
            self.instances[name] = len(self.instances)
            self.instance_names[self.instances[name]] = name
        return self.instances[name]
