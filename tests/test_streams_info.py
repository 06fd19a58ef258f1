"""Kafka Streams' SubscriptionInfo and AssignmentInfo (impl/streams_info.py) read from the
bytes Kafka Streams 4.4.0 wrote in a scale-up on serve (tests/catalogue/streams.py): an
instance running every task (offset sums -2), a newcomer with its restored positions, the
leader's assignment scheduling the probing rebalance, and the newcomer's standbys with
their changelog partitions and its "rejoin at once"; bytes cut short or with a byte
after the last field stay undecoded."""
import base64

import pytest

from rebalance.impl import consumer_protocol, streams_info
from rebalance.impl.wire import FrameError

# A-StreamThread-1-consumer's JoinGroup user data while it runs tasks 0_0..0_5
A_RUNNING = ("AAAACwAAAAuY6RZSv9JOLYsLOyKwsWrsAAAAAAAAAAYAAAAAAAAABf/////////+//8AAAAAAAAABP/////////+//8AAAAAAAAAA/"
             "/////////+//8AAAAAAAAAAv/////////+//8AAAAAAAAAAf/////////+//8AAAAAAAAAAP/////////+//8DAAAAAAAAAAA=")
# B's at the probing rebalance: standbys of the six tasks restored to these positions
B_WARM = ("AAAACwAAAAtudU37Wj9GmKNyG7Y3ACInAAAAAAAAAAYAAAAAAAAABQAAAAAAAATG//8AAAAAAAAABAAAAAAAAAMv//8AAAAAAAAAAwAAAA"
          "AAAAOT//8AAAAAAAAAAgAAAAAAAAP6//8AAAAAAAAAAQAAAAAAAARd//8AAAAAAAAAAAAAAAAAAAP5//8DAAAAAAAAAAA=")
# the leader's own assignment when B joined: every task, the probing rebalance at this wall time
A_PROBES = ("AAAACwAAAAsAAAAGAAAAAAAAAAAAAAAAAAAAAAAAAAEAAAAAAAAAAAAAAAIAAAAAAAAAAAAAAAMAAAAAAAAAAAAAAAQAAAAAAAAAAAAAAA"
            "UAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAGiIHrnaA==")
# B's at the probing rebalance: no active task yet (A revokes 0_1, 0_3, 0_5 first), six standbys, rejoin at once
B_AT_ONCE = ("AAAACwAAAAsAAAAAAAAABgAAAAAAAAAFAAAAAAAAAAEAFXN0cmVhbXMtc2NhbGVfdXAtMS1pbgAAAAUAAAAAAAAABAAAAAAAAAABABVz"
             "dHJlYW1zLXNjYWxlX3VwLTEtaW4AAAAEAAAAAAAAAAMAAAAAAAAAAQAVc3RyZWFtcy1zY2FsZV91cC0xLWluAAAAAwAAAAAAAAACAAA"
             "AAAAAAAEAFXN0cmVhbXMtc2NhbGVfdXAtMS1pbgAAAAIAAAAAAAAAAQAAAAAAAAABABVzdHJlYW1zLXNjYWxlX3VwLTEtaW4AAAABAA"
             "AAAAAAAAAAAAAAAAAAAQAVc3RyZWFtcy1zY2FsZV91cC0xLWluAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA==")
TOPIC = "streams-scale_up-1-in"


def b(text: str) -> bytes:
    return base64.b64decode(text)


def test_subscription_of_an_instance_running_every_task():
    s = streams_info.read_subscription(b(A_RUNNING))
    assert (s["version"], s["latest_supported_version"], s["user_endpoint"], s["error_code"]) == (11, 11, "", 0)
    assert s["process_id"] == "98e91652-bfd2-4e2d-8b0b-3b22b0b16aec"
    assert s["task_offset_sums"] == {f"0_{i}": -2 for i in range(6)}  # Task.LATEST_OFFSET: running active
    assert s["unique_field"] == 3 and s["client_tags"] == {}


def test_subscription_of_a_warm_newcomer():
    s = streams_info.read_subscription(b(B_WARM))
    assert s["task_offset_sums"] == {"0_5": 1222, "0_4": 815, "0_3": 915, "0_2": 1018, "0_1": 1117, "0_0": 1017}


def test_assignment_scheduling_the_probing_rebalance():
    a = streams_info.read_assignment(b(A_PROBES))
    assert a["active_tasks"] == [f"0_{i}" for i in range(6)] and a["standby_tasks"] == {}
    assert a["next_rebalance_ms"] == 1795841255272 and a["error_code"] == 0
    assert (a["version"], a["commonly_supported_version"]) == (11, 11)


def test_assignment_of_standbys_and_rejoin_at_once():
    a = streams_info.read_assignment(b(B_AT_ONCE))
    assert a["active_tasks"] == [] and a["next_rebalance_ms"] == 0
    assert a["standby_tasks"] == {f"0_{i}": [{"topic": TOPIC, "partitions": [i]}] for i in range(6)}
    assert a["partitions_by_host"] == a["standby_partitions_by_host"] == []


@pytest.mark.parametrize("read, data", [(streams_info.read_subscription, A_RUNNING),
                                        (streams_info.read_assignment, B_AT_ONCE)])
def test_short_or_long_bytes_are_refused(read, data):
    with pytest.raises(FrameError, match="truncated"):
        read(b(data)[:-1])
    with pytest.raises(FrameError, match="after its last field"):
        read(b(data) + b"\0")
    with pytest.raises(FrameError, match="version 6"):
        read(b"\0\0\0\x06" + b(data)[4:])


def test_the_trace_carries_it_beside_the_user_data():
    """A consumer-protocol assignment whose user data is an AssignmentInfo gets ``streams``;
    other user data (the seed's own Streams bytes, impl/streams_wire.py) gets none."""
    from rebalance.impl.streams_wire import encode_assignment

    def assignment(user_data: bytes) -> bytes:
        return consumer_protocol._write(consumer_protocol.ASSIGNMENT, 1, {
            "assigned_partitions": [{"topic": TOPIC, "partitions": [1]}], "user_data": user_data})
    decoded = consumer_protocol.assignment_json("consumer", assignment(b(B_AT_ONCE)))
    assert decoded["streams"] == streams_info.read_assignment(b(B_AT_ONCE))
    assert decoded["user_data"] == B_AT_ONCE
    assert "streams" not in consumer_protocol.assignment_json("consumer", assignment(encode_assignment((0b10, 0))))
