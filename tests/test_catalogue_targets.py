"""The scenario catalogue's targets and runs start from empty folders, so that a second
``make catalogue`` into the same ``--out`` plays afresh: a Kafka broker refused the storage
an earlier run had formatted (another cluster id), and the recorder appended the new run
to the old trace (2026-11-30)."""
from catalogue.targets import ServeTarget, fresh


def test_a_target_starts_from_an_empty_folder(tmp_path):
    stale = tmp_path / "broker-0" / "store"
    stale.mkdir(parents=True)
    (stale / "groups.json").write_text("an earlier run's groups")
    t = ServeTarget({}, tmp_path / "broker-0")
    try:
        assert not (stale / "groups.json").exists() and (tmp_path / "broker-0" / "serve.log").exists()
    finally:
        t.close()


def test_a_runs_folder_is_emptied(tmp_path):
    run = tmp_path / "scale_up-confluent"
    run.mkdir()
    (run / "trace.jsonl").write_text("an earlier run's trace\n")
    assert fresh(run) == run and list(run.iterdir()) == []
