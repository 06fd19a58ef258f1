"""How the state space grows with the fault budget, and what the next budget would cost
(issue 44, item 5: the main job at ``--max-faults 4``).

Each row is a real ``rebalance check --json`` process of one process of the local
engine (no ``--workers``) at one budget, run one after another, measured as
benchmarks/scaling.py measures (CPU-s of the process tree, peak summed PSS, wall):

- distinct states, transitions, depth and verdict;
- the growth: this budget's states over the previous one's;
- CPU-s, the rate (distinct states per CPU-second), peak PSS and bytes per state.

Then the projection of the next budget from the last two growth factors: between the
last factor again and the last factor scaled by its own change (the factors shrink
with each budget on the main job), as states, CPU-hours at the last row's rate, and
memory at the marginal bytes per state (the PSS added from the first row to the last,
over the states added), beside the machine's RAM. Run with the
machine idle for wall figures; the CPU-s and counts do not depend on load.

    python benchmarks/budget_growth.py examples/default.toml --budgets 1,2,3

Options not its own (``--budgets LIST``, ``--every S``) go to ``rebalance check``.
"""
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from scaling import RAM, machine, options, run  # noqa: E402 - the same measurement as the scaling table


def main() -> None:
    ap, budgets, every, args, _ = options(__doc__, "budgets", "1,2,3", "fault budgets, ascending")
    if len(budgets) < 3 or budgets != sorted(budgets):
        ap.error("--budgets needs at least three ascending budgets, to project the next one")
    print(f"rebalance check {' '.join(args)} --max-faults {','.join(map(str, budgets))}")
    print(machine())
    rows = []
    for b in budgets:
        load = os.getloadavg()[0]
        s = run([*args, "--max-faults", str(b)], every)
        rows.append((b, load, s))
        print(f"  ran budget {b}: {s['distinct_states']:,} states, {s['cpu']:.1f} CPU-s, {s['wall']:.1f} s, "
              f"peak PSS {s['pss'] / 2**20:,.0f} MB", flush=True)
    print()
    print("| budget | states | transitions | depth | verdict | growth | CPU-s | states/CPU-s | peak PSS MB "
          "| bytes/state | wall s | load |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    growth = []
    for i, (b, load, s) in enumerate(rows):
        g = s["distinct_states"] / rows[i - 1][2]["distinct_states"] if i else None
        growth.append(g)
        print(f"| {b} | {s['distinct_states']:,} | {s['transitions']:,} | {s['max_depth']} | {s['verdict']} | "
              f"{'-' if g is None else f'{g:.1f}x'} | {s['cpu']:.1f} | {s['distinct_states'] / s['cpu']:,.0f} | "
              f"{s['pss'] / 2**20:,.0f} | {s['pss'] / s['distinct_states']:.0f} | {s['wall']:.1f} | {load:.1f} |")
    last, before = growth[-1], growth[-2]
    s, first = rows[-1][2], rows[0][2]
    rate = s["distinct_states"] / s["cpu"]
    per_state = (s["pss"] - first["pss"]) / (s["distinct_states"] - first["distinct_states"])
    factors = sorted((last, last * last / before))
    low, high = (s["distinct_states"] * f for f in factors)
    print(f"\nprojected budget {budgets[-1] + 1} (growth {factors[0]:.1f}x to {factors[1]:.1f}x): "
          f"{low:,.0f} to {high:,.0f} states;")
    print(f"  {low / rate / 3600:,.1f} to {high / rate / 3600:,.1f} CPU-hours at {rate:,.0f} states/CPU-s;")
    print(f"  {low * per_state / 2**30:,.0f} to {high * per_state / 2**30:,.0f} GiB at {per_state:.0f} bytes/state "
          f"(marginal), against {RAM / 2**30:.0f} GiB of RAM")


if __name__ == "__main__":
    main()
