"""The coordinator's store (impl/store.py): JSON records that round-trip the model's
stored group exactly (R37), a store that never runs code from its file, and serve
starting empty unless given a store folder (issue 41 item 4)."""
import os
import pickle
import sqlite3

import pytest
from conftest import run_cli
from rebalance.impl.store import GroupRecord, Store, StoreError
from rebalance.model import coordinator
from rebalance.model.config import GroupConfig
from rebalance.model.coordinator import EMPTY_GROUP, stored
from rebalance.model.protocol import JoinGroup, Protocols, Receive, SyncGroup, connection, member_id
from rebalance.model.timing import Timeouts

CFG = GroupConfig(initial_rebalance_delay=False)
A1, B1 = member_id(0, 1), member_id(1, 1)


def stable_group():
    """A Stable group of two static and dynamic members with opaque metadata and assignments, as serve keeps it."""
    sub = Protocols("consumer", (("cooperative-sticky", b"\x00\x02meta"), ("range", b"\xff")))
    g = EMPTY_GROUP
    for conn, req in [(connection(0, 1), JoinGroup(0, sub, 1)), (connection(1, 1), JoinGroup(0, sub)),
                      (connection(0, 1), JoinGroup(A1, sub, 1))]:
        g, _ = coordinator.handle(CFG, g, Receive(conn, req))
    g, _ = coordinator.handle(CFG, g, Receive(connection(0, 1), SyncGroup(A1, g.generation, ((A1, b"\x01"),), 1)))
    return stored(g)


@pytest.mark.spec("R37")
def test_a_stored_group_comes_back_exactly(tmp_path):
    group = stable_group()
    assert group is not None and len(group.members) == 2
    record = GroupRecord(group, {A1: "a-1234", B1: "b-5678"}, {"static-a": 1}, {A1: Timeouts(6000, 30000)})
    path = tmp_path / "c"
    s = Store(path)
    s.save_group("g", record)
    s.close()
    loaded = Store(path).groups()
    assert loaded == {"g": record}
    assert type(loaded["g"].timeouts[A1]) is Timeouts and type(loaded["g"].group.phase) is type(group.phase)


def old_store(path, payload) -> None:
    """A store as rebalance wrote it before format 1: pickled records."""
    path.parent.mkdir()
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE groups (group_id TEXT PRIMARY KEY, record BLOB NOT NULL)")
    db.execute("INSERT INTO groups VALUES ('g', ?)", (payload,))
    db.commit()
    db.close()


class Planted:
    """Unpickling this creates a file: the code a pickled store can carry."""

    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        return (open, (self.path, "w"))


def test_a_pickled_store_is_refused_without_running_it(tmp_path):
    planted = tmp_path / "ran"
    old_store(tmp_path / "old" / "store.db", pickle.dumps(Planted(str(planted))))
    with pytest.raises(StoreError, match="older rebalance"):
        Store(tmp_path / "old")
    code, out, err = run_cli("serve", "--port", "0", "--topic", "t:2", "--store", tmp_path / "old")
    assert code == 2 and "older rebalance" in err and "Traceback" not in err
    assert not planted.exists()


def test_a_file_that_is_no_database_is_bad_input(tmp_path):
    (tmp_path / "junk").mkdir()
    (tmp_path / "junk" / "store.db").write_bytes(b"not a database at all" * 100)
    code, _, err = run_cli("serve", "--port", "0", "--topic", "t:2", "--store", tmp_path / "junk")
    assert code == 2 and "junk" in err and "Traceback" not in err


def test_an_undecodable_record_names_its_group(tmp_path):
    path = tmp_path / "c"
    Store(path).close()
    db = sqlite3.connect(path / "store.db")
    db.execute("INSERT INTO groups VALUES ('shop', '{\"group\": 1}')")
    db.commit()
    with pytest.raises(StoreError, match="group 'shop'"):
        Store(path).groups()


def test_serve_starts_empty_by_default_and_keeps_records_only_with_a_store(tmp_path, monkeypatch):
    """Issue 41 item 4: serve restarted twice in a row gives a high watermark of 1
    after one produce (each run a fresh temporary store, deleted on exit); with
    --store the second run continues at 1."""
    from interop.harness import Server
    from test_records import batch, latest, produce
    from test_serve import Client

    private = tmp_path / "tmp"  # serve's temporary directory, its own: other tests' serves make stores meanwhile
    private.mkdir()
    monkeypatch.setenv("TMPDIR", str(private))

    def one_produce_and_restart(store):
        server = Server(tmp_path, "t:1", store=store)
        try:
            marks = []
            for _ in range(2):
                c = Client(server.port, "producer")
                marks.append(produce(c, batch([b"x"])).base_offset)
                marks.append(latest(c))
                if not store:  # the running serve's temporary store, in its own temporary directory
                    assert [n for n in os.listdir(private) if n.startswith("rebalance-store-")]
                c.sock.close()
                server.stop()
                server.start()
            return marks
        finally:
            server.stop()
    assert one_produce_and_restart(False) == [0, 1, 0, 1]
    assert not [n for n in os.listdir(private) if n.startswith("rebalance-store-")]
    assert one_produce_and_restart(True) == [0, 1, 1, 2]
