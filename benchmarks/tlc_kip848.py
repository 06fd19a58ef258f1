"""KIP-848 side by side with TLC (issue 39, item 8): docs/kip848-tlc.md, generated.

Runs Vanlightly's TLA+ specification of KIP-848 (github.com/Vanlightly/kafka-tlaplus,
groupprotocol/consumer_group_protocol_kip_848_v2, its shipped .cfg: 2 clients, 2 topics x
1 partition, 1 perturbation, the invariants it names) under TLC with one worker, and
`rebalance check` at the same bounds (examples/kip848/tlc_bounds.toml) and at the bound
that gives each of TLC's crash-and-restart and leave-and-rejoin perturbations its two
faults here. Prints a Markdown page: per run, the verdict, distinct states, wall and
CPU seconds, peak memory (the largest process's resident set), the properties checked;
then how the two models differ, the machine and the date.

Nothing of TLC's is vendored. Fetch and pass:
  --tla2tools JAR   TLC (tla2tools.jar; not on Maven Central: a public repository that
                    carries it, e.g. github.com/iamaanahmad/alpenglow-verifier, TLC 2.20)
  --spec-dir DIR    the specification's groupprotocol/ directory
  --modules DIR     tlaplus/CommunityModules' modules/ (FiniteSetsExt, SequencesExt, ...)
A TLC run that outlasts --max-minutes (default 30) is stopped and reported undecided,
with the distinct states and the queue of its last progress report.

Usage: python benchmarks/tlc_kip848.py --tla2tools tla2tools.jar --spec-dir groupprotocol \
           --modules CommunityModules/modules > docs/kip848-tlc.md
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import date
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
REBALANCE = Path(sys.executable).parent / "rebalance"
SPEC = "consumer_group_protocol_kip_848_v2"
BOUNDS = ROOT / "examples" / "kip848" / "tlc_bounds.toml"
OURS = [("the same perturbations, budget 1", ()),
        ("with restart, budget 2 (TLC's crash restarts, its leave rejoins: two faults here)",
         ("--faults", "subscribe,leave,crash,restart,pause", "--max-faults", "2"))]
PROGRESS = re.compile(r"([\d,]+) distinct states found.*?([\d,]+) states left on queue")
FINAL = re.compile(r"([\d,]+) states generated, ([\d,]+) distinct states found, ([\d,]+) states left on queue")


def _children_rusage():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime, r.ru_maxrss


def _number(text: str) -> int:
    return int(text.replace(",", ""))


def checked_by_tlc(cfg: Path) -> list:
    """The invariants and properties the .cfg names (its uncommented INVARIANT and PROPERTY
    sections)."""
    names, section = [], None
    for line in cfg.read_text().splitlines():
        line = line.split("\\*")[0].strip()
        if not line:
            continue
        word = line.split()[0]
        if word.isupper():
            section = word if word in ("INVARIANT", "INVARIANTS", "PROPERTY", "PROPERTIES") else None
            rest = line.split()[1:]
        else:
            rest = line.split()
        if section:
            names += rest
    return names


def run_tlc(jar: Path, spec_dir: Path, modules: Path, max_minutes: float) -> dict:
    """TLC on the shipped .cfg, one worker, deadlock not checked (a converged group sends no
    more heartbeats: the specification's SendHeartbeatRequest requires ~Converged)."""
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        for f in [*spec_dir.glob("*.tla"), spec_dir / f"{SPEC}.cfg", *modules.glob("*.tla")]:
            shutil.copy(f, work / f.name)
        cpu0, _ = _children_rusage()
        t0 = time.monotonic()
        p = subprocess.Popen(["java", "-XX:+UseParallelGC", "-cp", str(jar.resolve()), "tlc2.TLC", "-workers", "1",
                              "-deadlock", "-config", f"{SPEC}.cfg", f"{SPEC}.tla"],
                             cwd=work, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        out, last, decided = [], None, False
        for line in p.stdout:
            out.append(line)
            print(f"  tlc: {line.rstrip()}", file=sys.stderr)  # progress, once a minute
            m = PROGRESS.search(line)
            if m:
                last = (_number(m.group(1)), _number(m.group(2)))
            if time.monotonic() - t0 > max_minutes * 60:
                p.kill()
                break
        p.wait()
        wall = time.monotonic() - t0
        cpu1, rss = _children_rusage()
        text = "".join(out)
        final = FINAL.search(text)
        if "No error has been found" in text and final:
            verdict, decided = "holds", True
        elif "is violated" in text or "Error:" in text:
            verdict, decided = "violated: " + next(x.strip() for x in out if "violated" in x or "Error:" in x), True
        else:
            verdict = f"undecided at {max_minutes:g} min"
        states = _number(final.group(2)) if final else (last[0] if last else 0)
        queue = _number(final.group(3)) if final else (last[1] if last else None)
        return {"verdict": verdict, "decided": decided, "states": states, "queue": queue, "wall": wall,
                "cpu": cpu1 - cpu0, "rss_mb": rss / 1024, "properties": checked_by_tlc(spec_dir / f"{SPEC}.cfg")}


def run_ours(extra: tuple) -> dict:
    with tempfile.TemporaryDirectory() as out:
        cpu0, _ = _children_rusage()
        t0 = time.monotonic()
        p = subprocess.run([str(REBALANCE), "check", str(BOUNDS), *extra, "--json", "--out", out],
                           capture_output=True, text=True)
        wall = time.monotonic() - t0
        cpu1, _ = _children_rusage()
    if p.returncode not in (0, 1):
        raise SystemExit(f"rebalance check {BOUNDS} {' '.join(extra)}: exit {p.returncode}: {p.stderr.strip()}")
    d = json.loads(p.stdout)
    broken = [x["name"] for x in d["properties"] if x["status"] != "holds"]
    return {"verdict": d["verdict"] + (f" ({', '.join(broken)} violated, as expected: zombies)" if broken else ""),
            "states": d["distinct_states"], "wall": wall, "cpu": cpu1 - cpu0, "rss_mb": d["peak_rss_mb"],
            "properties": [x["name"] for x in d["properties"]],
            "covers": [c["name"] for c in d["covers"] if c["reached"]]}


DIFFERENCES = """\
## How the two models differ

- **Assignment.** The TLA+ specification lets the coordinator pick any total target
  that gives each partition to a subscriber (BuildAssignment, `\\E candidates`); here the
  target is the `uniform` (or `range`) server assignor's, sticky as Kafka's is (K16). The
  specification's freedom covers every assignor and multiplies its states.
- **Names.** Its member ids and connection ids are counters in the state; here states are
  explored up to a renaming of member ids and epochs, so two runs that differ only in the
  names they drew are one state.
- **What it leaves out** (issue 39): static membership (K8), the rebalance timeout that
  fences a member that does not revoke (K7), offset commits and their epoch fencing (K11,
  with KIP-1251's assignment epochs), the previous-epoch tolerance for a lost response (K3),
  regular-expression subscriptions and topic creation (K9), the client's processes and
  their callbacks, pauses as such (it expires a live member's session instead), and the
  online migration from classic groups.
- **What it has that this checker does not:** a client may change its subscription to any
  non-empty set of topics as its perturbation; here a `subscribe` fault picks one of the
  configured `resubscriptions` (all three non-empty sets in examples/kip848/tlc_bounds.toml).
- **Properties.** Its invariants map onto this checker's: LegalTargetAssignment to
  `legal_target`, NoDoubleClientAssignment to `no_double_ownership`, ValidPartitionEpoch to
  `valid_partition_epochs`, ValidStableGroupState to `valid_stable_group`, ValidMemberEpoch to
  `valid_member_epoch`, its (commented-out) EventuallyConverges to `converges` and
  GcSideMemberEpochIsMonotonic to `epochs_monotonic`; TypeOK has no counterpart (Python's
  types and the handlers' assertions). The checker adds the ownership and commit properties
  of section 7, the release rule, stickiness and refinement against spec/consumer_actions.py.
"""


def page(tlc: dict, ours: list) -> str:
    lines = ["# KIP-848 side by side with TLC", "",
             "Generated by `python benchmarks/tlc_kip848.py` (never typed). Vanlightly's TLA+ specification of "
             "KIP-848 (`groupprotocol/consumer_group_protocol_kip_848_v2`) at its shipped bounds under TLC, one "
             "worker, and `rebalance check` at the same bounds (`examples/kip848/tlc_bounds.toml`).", "",
             "| run | verdict | distinct states | wall s | CPU s | peak RSS MB |", "| --- | --- | --- | --- | --- | --- |"]
    queue = f"; {tlc['queue']:,} states left on its queue" if not tlc["decided"] and tlc["queue"] is not None else ""
    lines.append(f"| TLC, shipped .cfg (invariants) | {tlc['verdict']}{queue} | {tlc['states']:,} | {tlc['wall']:.0f} | "
                 f"{tlc['cpu']:.0f} | {tlc['rss_mb']:.0f} |")
    for (what, _), r in zip(OURS, ours):
        lines.append(f"| rebalance check, {what} | {r['verdict']} | {r['states']:,} | {r['wall']:.1f} | "
                     f"{r['cpu']:.1f} | {r['rss_mb']:.0f} |")
    lines += ["", f"TLC checks: {', '.join(tlc['properties'])}.", "",
              f"rebalance check checks: {', '.join(ours[0]['properties'])} (liveness: `converges`, under fairness).",
              "", f"Covers reached at budget 1: {', '.join(ours[0]['covers'])}; at budget 2: "
              f"{', '.join(ours[1]['covers'])}.", "", DIFFERENCES,
              f"Machine: {platform.node()}, {platform.machine()}, {os.cpu_count()} CPUs, "
              f"{platform.python_implementation()} {platform.python_version()}, "
              f"{subprocess.run(['java', '-version'], capture_output=True, text=True).stderr.splitlines()[0]}; "
              f"load average {os.getloadavg()[0]:.1f} at the end (the machine may be shared: wall seconds stretch, "
              f"CPU seconds less); {date.today().isoformat()}.", ""]
    return "\n".join(lines)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tla2tools", type=Path, required=True, help="TLC's tla2tools.jar")
    ap.add_argument("--spec-dir", type=Path, required=True, help="kafka-tlaplus' groupprotocol/ directory")
    ap.add_argument("--modules", type=Path, required=True, help="tlaplus/CommunityModules' modules/ directory")
    ap.add_argument("--max-minutes", type=float, default=30, help="stop TLC after this long (default 30)")
    a = ap.parse_args(argv)
    for path, what in ((a.tla2tools, "--tla2tools"), (a.spec_dir / f"{SPEC}.tla", "--spec-dir"),
                       (a.modules / "SequencesExt.tla", "--modules")):
        if not path.exists():
            ap.error(f"{what}: {path} does not exist (see the module docstring for where to fetch it)")
    ours = [run_ours(extra) for _, extra in OURS]
    tlc = run_tlc(a.tla2tools, a.spec_dir, a.modules, a.max_minutes)
    print(page(tlc, ours))


if __name__ == "__main__":
    main()
