"""The coordinator's store (impl/store.py): JSON records that round-trip the model's
stored group exactly (R37), and a store that never runs code from its file."""
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
    path = str(tmp_path / "c.db")
    s = Store(path)
    s.save_group("g", record)
    s.close()
    loaded = Store(path).groups()
    assert loaded == {"g": record}
    assert type(loaded["g"].timeouts[A1]) is Timeouts and type(loaded["g"].group.phase) is type(group.phase)


def old_store(path, payload) -> None:
    """A store as rebalance wrote it before format 1: pickled records."""
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
    old_store(tmp_path / "old.db", pickle.dumps(Planted(str(planted))))
    with pytest.raises(StoreError, match="older rebalance"):
        Store(str(tmp_path / "old.db"))
    code, out, err = run_cli("serve", "--port", "0", "--topic", "t:2", "--store", tmp_path / "old.db")
    assert code == 2 and "older rebalance" in err and "Traceback" not in err
    assert not planted.exists()


def test_a_file_that_is_no_database_is_bad_input(tmp_path):
    (tmp_path / "junk.db").write_bytes(b"not a database at all" * 100)
    code, _, err = run_cli("serve", "--port", "0", "--topic", "t:2", "--store", tmp_path / "junk.db")
    assert code == 2 and "junk.db" in err and "Traceback" not in err


def test_an_undecodable_record_names_its_group(tmp_path):
    path = str(tmp_path / "c.db")
    Store(path).close()
    db = sqlite3.connect(path)
    db.execute("INSERT INTO groups VALUES ('shop', '{\"group\": 1}')")
    db.commit()
    with pytest.raises(StoreError, match="group 'shop'"):
        Store(path).groups()
