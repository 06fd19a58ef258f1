"""The executable transition model: pure, deterministic, sans-I/O.

Every actor is an immutable state plus a pure handler
``handle(cfg, state, input) -> (state', outputs)``:

* ``coordinator``: the group coordinator (``Group``);
* ``member``: a consumer running the embedded protocol (``Consumer``);
* ``assignors``: the leader's partition assignors;
* ``protocol``: messages, errors and identifiers;
* ``config``: the static ``GroupConfig`` and the named mutations.

The checker (rebalance.checker) calls these handlers, and so will the shipped
implementation (rebalance.impl); no other copy of the protocol logic exists.
"""
