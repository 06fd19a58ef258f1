"""The judge stands on its own (issue 43; DESIGN, "checker/properties.py is the
judge"): no property, cover or proof obligation calls a rule function of model/,
so that a bug in a rule cannot judge itself. Read off the judge modules' imports:
from rebalance.model they take only model/protocol.py (message and state shapes,
id and bitmask encodings) and state types (classes) or tables (data, such as the mutation registry); a proof obligation may also
call the model entry points it proves things about (its subject, named here with
why), never a rule to compute what the answer should be."""
import ast
import importlib
import inspect
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
# the modules that judge: properties and covers, the known findings' shapes, the spec, the proof obligations,
# and what the properties reach into (the lasso search of bounded_deferral, the refinement check)
JUDGES = ("checker/properties.py", "checker/refinement.py", "checker/engines/churn.py",
          "spec/actions.py", "checker/prove.py", "checker/round_obligations.py", "checker/consumer_properties.py",
          "spec/consumer_actions.py", "checker/consumer_refinement.py", "checker/consumer_prove.py")
# what a proof obligation runs and judges, never computes its verdict with: the assignors' entry point, and the
# claim resolution the "transcription agrees with model/assignors.py" obligation holds the z3 transcription to
SUBJECTS = {"checker/prove.py": {"assign", "resolve_claims", "contested_claims"},
            "checker/round_obligations.py": {"assign"},
            # KIP-848's: the server assignors through the mutation switch (rule) and the reconciliation they prove
            "checker/consumer_prove.py": {"assign", "reconcile", "rule"}}


def _model_imports(path: Path):
    """``(module, name)`` for every name ``path`` imports from rebalance.model (name
    None for a whole module)."""
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("rebalance.model"):
            for alias in node.names:
                yield node.module, alias.name
        elif isinstance(node, ast.ImportFrom) and node.level and node.module is None:
            pass  # relative imports stay inside checker/ or spec/
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("rebalance.model"):
                    yield alias.name, None


@pytest.mark.parametrize("judge", JUDGES)
def test_no_judge_imports_a_rule_of_the_model(judge):
    path = ROOT / judge
    assert path.exists(), judge
    subjects = SUBJECTS.get(judge, set())
    for module, name in _model_imports(path):
        assert name is not None, f"{judge} imports the whole module {module}"
        if module == "rebalance.model.protocol" or name in subjects:
            continue
        value = getattr(importlib.import_module(module), name)
        assert inspect.isclass(value) or not callable(value), \
            f"{judge} imports {name} from {module}: a rule of the model, not a shape or a table"


def test_the_check_sees_a_planted_rule_import(tmp_path):
    """The test fails on what it exists to catch: a property importing the model's
    allowance (as moves_within_allowance did before issue 43)."""
    planted = tmp_path / "planted.py"
    planted.write_text("from rebalance.model.assignors import _move_allowance\nfrom rebalance.model.protocol import Phase\n")
    imported = list(_model_imports(planted))
    assert imported == [("rebalance.model.assignors", "_move_allowance"), ("rebalance.model.protocol", "Phase")]
    assert not inspect.isclass(getattr(importlib.import_module(imported[0][0]), imported[0][1]))
