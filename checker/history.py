"""Kafka's historical rebalance bugs, rediscovered by ``rebalance check``.

``HISTORY``: one ``Bug`` per row of the table *Kafka's history, rediscovered*
(docs/explanation/history.md):
the JIRA, the mutations that put the historical behaviour back
(model/mutations.py REGISTRY, which gives the Kafka versions that had it), the
``rebalance check`` arguments that show it, the property its shortest
counterexample breaks and that counterexample's length in steps (0 and "" for a
row the checker finds nothing in, with the reason). ``table()`` renders the
table from it; tests/test_history.py holds the page to ``table()`` and
runs every row, with and without its mutations.
"""
from __future__ import annotations

from typing import NamedTuple

from rebalance.model.mutations import REGISTRY


class Bug(NamedTuple):
    """``jira``: KAFKA-nnnnn; ``mutations``: the names switched on; ``args``: the rest
    of the ``rebalance check`` command line; ``property``: the property broken
    (its counterexample under ``--continue``), "" if none; ``length``: that
    counterexample's steps; ``note``: what happens, in a few words; ``versions``:
    the Kafka versions, when no mutation of the row is registered under its JIRA."""

    jira: str
    mutations: tuple
    args: tuple
    property: str
    length: int
    note: str
    versions: str = ""


ZOMBIES = ("--members", "2", "--partitions", "2", "--faults", "pause,crash,join")
COOP = ("--faults", "join,leave,crash")
STATIC_RESTARTS = ("--static", "--members", "2", "--partitions", "2", "--faults", "join,crash,restart", "--max-faults", "3")
DEFERRED_JOINS = ("--protocol", "deferred", "--members", "2", "--partitions", "4", "--faults", "join,leave",
                  "--max-faults", "3")
SLOW = (COOP, DEFERRED_JOINS)  # 15 s or more per run on 2 shared cores

HISTORY = (
    Bug("KAFKA-12983", ("keep-owned-on-unknown-member-id",), ZOMBIES, "exclusive_commits", 23,
        "a zombie answered UNKNOWN_MEMBER_ID rejoins still owning its partitions and commits them under its "
        "new member id while their new owner commits them too"),
    Bug("KAFKA-12890", ("no-pending-sync-expiry",), ("--members", "2", "--partitions", "2", "--faults", "pause"),
        "quiescent_balance", 7,
        "the leader stops (its heartbeat thread alive) before its JoinGroup response: the group stays in "
        "CompletingRebalance for good"),
    Bug("KAFKA-7026", ("sticky-user-data-without-generation",), ("--protocol", "eager", "--assignor", "sticky") + ZOMBIES,
        "exclusive_ownership", 24,
        "a zombie rejoins claiming its old assignment from the StickyAssignor's user data; the leader keeps the "
        "partition with it and with its new owner, and both can commit it"),
    Bug("KAFKA-9801", ("static-rejoin-completing-no-rebalance",), STATIC_RESTARTS, "quiescent_balance", 12,
        "a static member restarts while the group completes a rebalance: it gets the current generation and an "
        "empty assignment, and its partitions stay with nobody"),
    Bug("KAFKA-8500", ("replace-static-only-when-stable",), STATIC_RESTARTS, "unique_instance", 5,
        "a static member restarts while the group rebalances: its new process is added beside the old member id, "
        "two members with one group.instance.id"),
    Bug("KAFKA-12495", ("skip-consecutive-revocation",), DEFERRED_JOINS, "quiescent_balance", 34,
        "a worker joining right after a revoking round gets nothing, and no rebalance is scheduled to give it "
        "work (Kafka Connect)"),
    Bug("KAFKA-14639", ("keep-owned-on-rebalance-in-progress", "ignore-owned-generation"), COOP,
        "revoke_before_assign", 25,
        "a member's claim tagged with an older generation after REBALANCE_IN_PROGRESS is dropped by the "
        "generation filter: its partitions go to another member while it still owns them",
        versions="3.0-3.4.0 (fixed in 3.4.1, 3.5)"),
    Bug("KAFKA-14016", ("reset-generation-on-rebalance-in-progress", "ignore-owned-generation"), COOP,
        "revoke_before_assign", 25,
        "KAFKA-13891's reset: the claim after REBALANCE_IN_PROGRESS carries no generation, the generation filter "
        "drops it, and the partitions go to another member while their owner still holds them",
        versions="3.3 (KAFKA-13891's reset beside KAFKA-12984's filter; reverted)"),
    Bug("KAFKA-13891", ("reset-generation-on-rebalance-in-progress",), COOP, "", 0,
        "alone nothing: an assignor that weighs claims keeps an uncontested claim of any generation"),
    Bug("KAFKA-13419", ("keep-owned-on-rebalance-in-progress",), COOP, "", 0,
        "alone nothing: the claim is true, and an assignor that weighs claims keeps it with its owner"),
    Bug("KAFKA-12984", ("ignore-owned-generation",), COOP, "", 0,
        "alone nothing: with every client telling the truth no two live members claim one partition"),
)


def command(bug: Bug) -> str:
    """The ``rebalance check`` command line of a row."""
    muts = " ".join(f"--mutation {m}" for m in bug.mutations)
    return f"rebalance check {' '.join(bug.args)} {muts} --continue"


def versions(bug: Bug) -> str:
    """The Kafka versions that had the bug: the registry's, of the row's mutation
    registered under its JIRA, else the row's own."""
    return next((REGISTRY[m].versions for m in bug.mutations if REGISTRY[m].jira == bug.jira), bug.versions)


def table() -> str:
    """The docs' table of historical bugs, one line per ``HISTORY`` row, in Markdown."""
    lines = ["| JIRA | Kafka versions | mutations | property broken | counterexample | what happens | command |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    for bug in HISTORY:
        caught = f"`{bug.property}`" if bug.property else "nothing"
        length = f"{bug.length} steps" if bug.length else "—"
        muts = ", ".join(f"`{m}`" for m in bug.mutations)
        lines.append(f"| {bug.jira} | {versions(bug)} | {muts} | {caught} | {length} | {bug.note} | "
                     f"`{command(bug)}` |")
    return "\n".join(lines) + "\n"
