"""Kafka Streams 4.4.0 on ``rebalance serve`` (tests/catalogue/streams.py, docs/streams.md),
CI's one Streams run (interop): a count per key over six tasks scales up
from one instance to two, recorded through ``rebalance proxy``. B first gets standbys of
every task while A keeps them all; the probing rebalance (probing.rebalance.interval.ms
60 s, its minimum) hands three tasks to B, through a round that withholds them for their
revocation. The run must reach that situation, count every input record exactly once end
to end, and conform on both sides (the members side reading Kafka Streams' AssignmentInfo
for the followup rebalances, impl/streams_info.py). About 80 s. The same scenario on the
real Kafka 4.4.0 broker, and the table beside the model, run with ``make streams``."""
import pytest

from catalogue.streams import STREAMS, run_streams
from catalogue.targets import played_on


@pytest.mark.interop
def test_scale_up_from_one_instance_to_two(tmp_path):
    r = played_on("serve", tmp_path, lambda t: run_streams(STREAMS["scale_up"], t, tmp_path / "run"))
    assert r.error is None, r.error
    assert r.reached, r.situation
    assert r.counts["correct"], r.counts
    assert {side: v["verdict"] for side, v in r.conform.items()} == {"coordinator": "conforms",
                                                                     "members": "conforms"}, r.conform
