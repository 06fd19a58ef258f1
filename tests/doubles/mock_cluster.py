"""librdkafka's mock cluster (rdkafka_mock.h) on loopback, for the scenario catalogue's
fidelity table (tests/catalogue/doubles.py): a one-broker cluster that any client can
reach over TCP, started through librdkafka's own C API (``rd_kafka_mock_cluster_new``,
``rd_kafka_mock_cluster_bootstraps``) with ctypes, from the librdkafka that
confluent-kafka bundles (confluent-kafka does not expose the mock cluster to other
clients).

    python mock_cluster.py [--initial-rebalance-delay-ms MS]

Prints ``bootstrap HOST:PORT`` once the cluster listens, then reads commands on stdin,
one a line, answering ``ok`` or ``error MESSAGE``:

* ``topic NAME PARTITIONS``: ``rd_kafka_mock_topic_create`` (replication factor 1);
* ``close`` (or the end of stdin): ``rd_kafka_mock_cluster_destroy``, exit 0.

Exit 2 when librdkafka or its mock API cannot be loaded.
"""
from __future__ import annotations

import argparse
import ctypes
import glob
import os
import sys

RD_KAFKA_PRODUCER = 0


def library() -> ctypes.CDLL:
    """The librdkafka shared object confluent-kafka ships (confluent_kafka.libs)."""
    import confluent_kafka

    here = os.path.dirname(os.path.dirname(confluent_kafka.__file__))
    found = sorted(glob.glob(os.path.join(here, "confluent_kafka.libs", "librdkafka*.so*")))
    if not found:
        raise OSError("no librdkafka in confluent_kafka.libs")
    lib = ctypes.CDLL(found[0])
    lib.rd_kafka_conf_new.restype = ctypes.c_void_p
    lib.rd_kafka_conf_set.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p,
                                      ctypes.c_size_t]
    lib.rd_kafka_new.restype = ctypes.c_void_p
    lib.rd_kafka_new.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t]
    lib.rd_kafka_mock_cluster_new.restype = ctypes.c_void_p
    lib.rd_kafka_mock_cluster_new.argtypes = [ctypes.c_void_p, ctypes.c_int]
    lib.rd_kafka_mock_cluster_bootstraps.restype = ctypes.c_char_p
    lib.rd_kafka_mock_cluster_bootstraps.argtypes = [ctypes.c_void_p]
    lib.rd_kafka_mock_topic_create.restype = ctypes.c_int
    lib.rd_kafka_mock_topic_create.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int, ctypes.c_int]
    lib.rd_kafka_mock_group_initial_rebalance_delay_ms.argtypes = [ctypes.c_void_p, ctypes.c_int32]
    lib.rd_kafka_mock_cluster_destroy.argtypes = [ctypes.c_void_p]
    lib.rd_kafka_destroy.argtypes = [ctypes.c_void_p]
    lib.rd_kafka_err2name.restype = ctypes.c_char_p
    return lib


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--initial-rebalance-delay-ms", type=int, default=None,
                   help="rd_kafka_mock_group_initial_rebalance_delay_ms (librdkafka's mock default: 3000)")
    a = p.parse_args(argv)
    try:
        lib = library()
    except (OSError, ImportError, AttributeError) as e:
        print(f"error: librdkafka's mock cluster cannot be loaded: {e}", file=sys.stderr)
        return 2
    errstr = ctypes.create_string_buffer(512)
    conf = lib.rd_kafka_conf_new()
    lib.rd_kafka_conf_set(conf, b"client.id", b"mock-cluster", errstr, len(errstr))
    rk = lib.rd_kafka_new(RD_KAFKA_PRODUCER, conf, errstr, len(errstr))  # the handle the mock cluster runs on
    if not rk:
        print(f"error: rd_kafka_new: {errstr.value.decode()}", file=sys.stderr)
        return 2
    cluster = lib.rd_kafka_mock_cluster_new(rk, 1)
    if a.initial_rebalance_delay_ms is not None:
        lib.rd_kafka_mock_group_initial_rebalance_delay_ms(cluster, a.initial_rebalance_delay_ms)
    print(f"bootstrap {lib.rd_kafka_mock_cluster_bootstraps(cluster).decode()}", flush=True)
    for line in sys.stdin:
        words = line.split()
        if not words:
            continue
        if words[0] == "close":
            break
        if words[0] == "topic" and len(words) == 3 and words[2].isdigit():
            err = lib.rd_kafka_mock_topic_create(cluster, words[1].encode(), int(words[2]), 1)
            print("ok" if err == 0 else f"error {lib.rd_kafka_err2name(err).decode()}", flush=True)
        else:
            print(f"error unknown command {line.strip()!r}", flush=True)
    lib.rd_kafka_mock_cluster_destroy(cluster)
    lib.rd_kafka_destroy(rk)
    return 0


if __name__ == "__main__":
    sys.exit(main())
