"""KIP-848's online migration in ``rebalance serve``: a group id moves between a classic
group (impl/coordinator.py's GroupRuntime) and a consumer group (impl/consumer_group.py's
ConsumerGroupRuntime) when the model's migration coordinator
(model/consumer_group/migration.py ``handle``) converts it (spec/KIP848.md M1, M2).

impl/ decides no protocol question here either: it only translates a classic group between
serve's wire form, where a member's subscription is its JoinGroup's ``Protocols`` (opaque
bytes, as Kafka keeps them) and its assignment the bytes its leader sent, and the model's
form, where they are the ``Subscription`` and ``Assignment`` a consumer group reads
(GroupMetadataManager.deserializeSubscription, ConsumerGroup.fromClassicGroup), and back
(ClassicGroup.fromConsumerGroup keeps each member's protocols and serializes its target
assignment).
"""
from __future__ import annotations

from rebalance.model.config import GroupConfig
from rebalance.model.coordinator import Group
from rebalance.model.protocol import EMPTY_ASSIGNMENT, Protocols, Subscription

from .consumer_protocol import carries_user_data, decode_assignment, decode_subscription, encode_assignment


def model_subscription(cfg: GroupConfig, protocols: Protocols, selected: str = "") -> Subscription:
    """A JoinGroup's protocols as the model's Subscription: the ``selected`` protocol's
    metadata (the first's if none is selected yet) decoded, the protocols' names its
    ``assignors``. Raises FrameError if the metadata is no ConsumerProtocolSubscription."""
    names = tuple(name for name, _ in protocols.protocols)
    data = protocols.metadata(selected) if selected in names else protocols.protocols[0][1]
    return decode_subscription(cfg, data)._replace(assignors=names)


def model_form(cfg: GroupConfig, group: Group) -> Group:
    """Serve's classic ``group`` in the model's form (an upgrade reads it, M1: the assignments'
    partitions and whether they carry user data)."""
    return group._replace(members=tuple(m._replace(
        subscription=model_subscription(cfg, m.subscription, group.protocol),
        assignment=decode_assignment(cfg, m.assignment)._replace(user_data=carries_user_data(m.assignment))
        if isinstance(m.assignment, bytes) else m.assignment)
        for m in group.members))


def wire_form(cfg: GroupConfig, group: Group, protocols: dict) -> Group:
    """A classic group the model made from a consumer group (M2) in serve's form: each
    member's subscription the ``protocols`` it last joined with ({member id: Protocols}),
    its assignment's bytes (EMPTY_ASSIGNMENT for none)."""
    return group._replace(members=tuple(m._replace(
        subscription=protocols[m.member_id],
        assignment=encode_assignment(cfg, m.assignment) if m.assignment.partitions else EMPTY_ASSIGNMENT)
        for m in group.members))


def protocols_of(group: Group) -> dict:
    """{member id: Protocols} of serve's classic ``group``."""
    return {m.member_id: m.subscription for m in group.members}

