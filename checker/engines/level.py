"""One breadth-first level's transitions, a batch of frontier states at a time
(issue 17, "≥ 40k states per CPU-second"): both engines' inner loop
(checker/engines/explore.py, workers.py).

A batch is a matrix of id rows, one per state; its successors
(``Expander.rows``, checker/engines/expansion.py) another, one per transition, and
what each engine needs of a transition is computed on the whole matrix with
numpy: the canonical form (``Renamer.canonical_rows``), whether it is a stutter,
its fairness class, and the step checks (``Steps.check``). Only what a memo has
not seen yet is computed in Python.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import numpy as np

from ..system import System
from .expansion import Expander
from .interning import Interner
from .renaming import Renamer
from .steps import Steps

BATCH = 4096  # frontier states expanded at once (2,048: 7.5% more CPU on the main job, the same peak)


def cat(parts: list, dtype, empty: tuple = (0,)) -> np.ndarray:
    """The arrays ``parts`` end to end, as ``dtype``; of shape ``empty`` if there are none."""
    return np.concatenate(parts).astype(dtype, copy=False) if parts else np.empty(empty, dtype)


@dataclass
class Batch:
    """The transitions out of a batch of frontier states, in the order the states
    are given and, per state, in ``System.successors``'s order (shapes: ``T``
    transitions, ``m`` states, ``w`` the id tuple's width).

    ``src``: (T,) int64, the position of each one's state in the batch; ``index``:
    (T,) its index among that state's successors; ``aid``: (T,) its Action's index
    in ``actions``, the batch's distinct Actions;
    ``raw``: (T, w) int64, the successors' ids before renaming; ``canonical``: (T, w)
    after it; ``stutter``: (T,) bool, whether it leads back to its state;
    ``classes``: (T,) the fairness class ids (``class_id``), empty without;
    ``marks``: (T,) uint8, the liveness marks (explore.py ``marks_of``); ``broken``:
    ``[(t, property name, reason)]``, the step checks broken, the first of each
    property, by transition; ``moved``: (m,) bool, whether a state has a
    transition of the system's own (not the environment's) to another state;
    ``kinds``: Counter of action kinds."""

    src: np.ndarray
    index: np.ndarray
    aid: np.ndarray
    actions: list
    raw: np.ndarray
    canonical: np.ndarray
    stutter: np.ndarray
    classes: np.ndarray
    marks: np.ndarray
    broken: list
    moved: np.ndarray
    kinds: Counter


class Level:
    """Expands batches of frontier states for one exploration: its memos (successors,
    renaming, checks) live as long as the exploration's ``interner``. ``class_id``
    (``Graph.class_id``) numbers fairness classes, None when no liveness graph is
    kept; ``unfair``: the action kinds that are the environment's."""

    def __init__(self, system: System, interner: Interner, stepping: Steps, unfair: frozenset, fairness=None,
                 class_id=None):
        self.interner, self.stepping = interner, stepping
        self.expander = Expander(system, interner)
        self.renamer = Renamer()  # its own caches, keyed by ids
        self.unfair, self.fairness, self.class_id = unfair, fairness, class_id

    def expand(self, rows: np.ndarray, states: list) -> Batch:
        """The Batch of transitions out of the states with id rows ``rows`` ((m, w)
        int64) and States ``states`` (m of them)."""
        successors = self.expander.rows(rows, states)
        src, raw = successors.src, successors.raw
        total = len(src)
        counts = np.bincount(src, minlength=len(states))
        index = np.arange(total) - (counts.cumsum() - counts)[src]
        used, aid = np.unique(successors.aid, return_inverse=True)
        aid = aid.reshape(-1)
        distinct = [self.expander.actions[k] for k in used.tolist()]
        canonical = self.renamer.canonical_rows(raw, self.interner)
        stutter = (canonical == rows[src]).all(axis=1)
        uses = np.bincount(aid, minlength=len(distinct)).tolist()
        kinds = Counter()
        for a, n in zip(distinct, uses):
            kinds[a.kind] += n
        classes = np.empty(0, np.int64)
        if self.class_id is not None:
            classes = np.array([self.class_id(self.fairness(a)) for a in distinct], np.int64)[aid]
        own = np.array([a.kind not in self.unfair for a in distinct], bool)[aid] & ~stutter
        moved = np.zeros(len(states), bool)
        moved[src[own]] = True
        marks = np.zeros(total, np.uint8)
        live = (~stutter).nonzero()[0]
        marks[live], broken = self.stepping.check(states, rows[src[live]], raw[live], src[live], aid[live], distinct)
        broken = [(int(live[t]), name, why) for t, name, why in broken]
        return Batch(src, index, aid, distinct, raw, canonical, stutter, classes, marks, broken, moved, kinds)
