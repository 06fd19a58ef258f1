"""The declarative specification of KIP-848's consumer group protocol (spec/KIP848.md,
"Declarative specification"): an abstract state and, for every action, its
post-condition over (state, next state), and the invariant every state meets; the
contract checker/consumer_refinement.py holds the model's every step to.

Nothing here calls the model's handlers. Conditions are written once over a logic
(spec/actions.py's ``PYTHON``; z3's would read them alike).

The abstract state (``View``) keeps what ownership depends on:

* ``epoch``, ``target_epoch``: the group's epochs; ``free``: the partitions whose
  partition epoch is unset (a bitmask);
* per client slot ``i``: ``live[i]``, a process runs (or is paused) there;
  ``owned[i]``, the partitions its client owns; ``known[i]``, its member id is a member
  of the group; ``holding[i]``, what the coordinator's record of that member holds
  (assigned or pending revocation; 0 if unknown); ``stale[i]``, what the records of the
  slot's other member ids (of processes gone, awaiting their session timeout) hold.
"""
from __future__ import annotations

from typing import NamedTuple


class View(NamedTuple):
    epoch: object
    target_epoch: object
    free: object
    live: tuple
    owned: tuple
    known: tuple
    holding: tuple
    stale: tuple


SLOT_FIELDS = ("live", "owned", "known", "holding", "stale")
CLIENT_FIELDS = ("live", "owned")

# --- spec mutations: a deliberately wrong contract, to see refinement fail ----------
SPEC_MUTATIONS = {
    "reconcile-takes-nothing": "the reconciliation action says a client takes no partition (the model's take "
                               "their target's, K13)",
}


def slots(s: View) -> range:
    return range(len(s.live))


def held(s: View, i: int):
    return s.holding[i] | s.stale[i]


def _same(s: View, t: View, field: str, i: int):
    return getattr(t, field)[i] == getattr(s, field)[i]


def _coordinator_unchanged(L, s: View, t: View):
    """The group's epochs, free partitions and what each slot's members hold. (Whether one
    is the slot's current process's may change: a crashed process's member is stale.)"""
    return L.And(t.epoch == s.epoch, t.target_epoch == s.target_epoch, t.free == s.free,
                 *(held(t, j) == held(s, j) for j in slots(s)))


def _clients_unchanged(L, s: View, t: View, but: int = -1):
    return L.And(*(_same(s, t, f, j) for j in slots(s) if j != but for f in CLIENT_FIELDS))


def _others_unchanged(L, s: View, t: View, i: int):
    return L.And(*(_same(s, t, f, j) for j in slots(s) if j != i for f in SLOT_FIELDS))


# --- the actions: each yields (clause, condition) pairs ----------------------------

def heartbeat_post(L, s, t, i, muts):
    """K1-K9: the coordinator handles slot i's heartbeat: no client changes; the group's
    epochs only grow; only slot i's member records change (its member and the member ids
    it replaces); a partition joins them only from the free ones (the release rule)."""
    yield "no client changes", _clients_unchanged(L, s, t)
    yield "epochs only grow", L.And(t.epoch >= s.epoch, t.target_epoch >= s.target_epoch)
    yield "other slots' records unchanged", L.And(*(L.And(_same(s, t, "known", j), _same(s, t, "holding", j),
                                                          _same(s, t, "stale", j)) for j in slots(s) if j != i))
    yield "a partition is taken only once free (K5)", ((held(t, i) & ~held(s, i)) & ~s.free) == 0


def commit_post(L, s, t, i, muts):
    """K11: an OffsetCommit changes nothing of ownership."""
    yield "nothing abstract changes", L.And(_coordinator_unchanged(L, s, t), _clients_unchanged(L, s, t))


def response_post(L, s, t, i, muts):
    """K12, K14: a client handles a response: the coordinator and the others unchanged; it
    owns nothing new (a fencing drops everything, K14)."""
    yield "the coordinator unchanged", _coordinator_unchanged(L, s, t)
    yield "the other clients unchanged", _clients_unchanged(L, s, t, i)
    yield "owns nothing new", (t.owned[i] & ~s.owned[i]) == 0


def reconcile_post(L, s, t, i, muts):
    """K13: a reconciliation stage: the coordinator and the others unchanged; a partition
    the client takes is one its member holds at the coordinator (as assigned or pending
    revocation: it was given it and has not reported it released), while its member is
    known."""
    yield "the coordinator unchanged", _coordinator_unchanged(L, s, t)
    yield "the other clients unchanged", _clients_unchanged(L, s, t, i)
    if "reconcile-takes-nothing" in muts:
        yield "takes nothing", (t.owned[i] & ~s.owned[i]) == 0
    else:
        # a zombie (its member fenced while it was paused) may complete a stale reconciliation: its commits
        # are refused (exclusive_commits), its processing is exclusive_processing's known breach
        yield "takes only what its member holds", L.Implies(s.known[i], (t.owned[i] & ~s.owned[i] & ~s.holding[i]) == 0)


def release_post(L, s, t, i, muts):
    """K14: a fenced client's onPartitionsLost completed: it owns nothing; it rejoins."""
    yield "the coordinator unchanged", _coordinator_unchanged(L, s, t)
    yield "the other clients unchanged", _clients_unchanged(L, s, t, i)
    yield "owns nothing", t.owned[i] == 0


def timer_post(L, s, t, i, muts):
    """K7, K9: the coordinator's own events (a timeout fences a member; a resolution or a
    new topic bumps the epoch): no client changes; members only removed, freeing what they
    held."""
    yield "no client changes", _clients_unchanged(L, s, t)
    yield "epochs only grow", L.And(t.epoch >= s.epoch, t.target_epoch >= s.target_epoch)
    yield "members only removed", L.And(*(L.And((held(t, j) & ~held(s, j)) == 0,
                                               L.Implies(t.known[j], s.known[j])) for j in slots(s)))


def local_post(L, s, t, i, muts):
    """A client's step that changes nothing abstract (a heartbeat sent, a commit sent, a
    resume, a subscription change noted)."""
    yield "nothing abstract changes", L.And(_coordinator_unchanged(L, s, t), _clients_unchanged(L, s, t))


def start_post(L, s, t, i, muts):
    """join, restart: a new process with nothing owned; the coordinator unchanged."""
    yield "the coordinator unchanged", _coordinator_unchanged(L, s, t)
    yield "the other clients unchanged", _clients_unchanged(L, s, t, i)
    yield "a fresh client", L.And(t.live[i], t.owned[i] == 0)


def stop_post(L, s, t, i, muts):
    """leave, crash: the process is gone with what it owned; the coordinator unchanged (a
    leave's heartbeat is still to be delivered)."""
    yield "the coordinator unchanged", _coordinator_unchanged(L, s, t)
    yield "the other clients unchanged", _clients_unchanged(L, s, t, i)
    yield "nothing left", L.And(L.Not(t.live[i]), t.owned[i] == 0)


ACTIONS = {
    "heartbeat delivered": heartbeat_post, "commit delivered": commit_post, "response handled": response_post,
    "reconcile": reconcile_post, "release": release_post, "coordinator event": timer_post, "local": local_post,
    "start": start_post, "stop": stop_post,
}


def invariant(L, s: View):
    """Every state: the coordinator's members hold disjoint partitions, the free ones
    exactly those nobody holds (K6), and a live client whose member is known owns only
    what that member holds (K12: it reports what it may still add)."""
    pairs = [(j, k) for j in slots(s) for k in slots(s) if j < k]
    yield "members hold disjoint partitions", L.And(*((held(s, j) & held(s, k)) == 0 for j, k in pairs),
                                                    *((s.holding[j] & s.stale[j]) == 0 for j in slots(s)))
    everything = 0
    for j in slots(s):
        everything = everything | held(s, j)
    yield "free exactly when nobody holds it (K6)", (s.free & everything) == 0
    yield "a known client owns only what its member holds", L.And(*(
        L.Implies(L.And(s.live[j], s.known[j]), (s.owned[j] & ~s.holding[j]) == 0) for j in slots(s)))
