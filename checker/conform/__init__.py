"""Trace conformance: a recorded trace (spec/TRACE.md, format v2) held against the model.

``rebalance conform`` reads a trace that a broker, a proxy or a client recorded and
replays it through the model's own handlers (model/coordinator.py for the
coordinator's responses, model/member.py for the clients' requests), resolving
the model's nondeterminism (timers, the order requests were processed in) by a
bounded search, and names the first record and rule (R..) where the trace and the
model part (trace checking as constrained model checking: Cirstea, Kuppe,
Loillier, Merz 2024). ``--side clients`` judges what applications observed
(rebalance callbacks, commits) when no broker trace exists.
"""
