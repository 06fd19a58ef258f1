"""Issue 41 item 2: the configuration's published JSON Schema (spec/config.schema.json, on
the docs site under schemas/) names exactly the keys the checker accepts
(checker/settings.py SCHEMA, SCALARS), every shipped example validates against it, and a
file the checker refuses for an unknown key the schema refuses too."""
import json
import tomllib

from jsonschema import Draft202012Validator

from conftest import EXAMPLES, ROOT
from rebalance.checker.settings import SCALARS, SCHEMA

STREAMS_SCENARIO = {"seed_title", "rounds"}  # Streams seed scenarios (checker/streams_replay.py)
VALIDATOR = Draft202012Validator(json.loads((ROOT / "spec" / "config.schema.json").read_text()))


def test_the_schema_names_the_checkers_keys():
    props = VALIDATOR.schema["properties"]
    assert set(props) == set(SCHEMA) | set(SCALARS) | STREAMS_SCENARIO
    for section, keys in SCHEMA.items():
        extra = {"tasks"} if section == "initial" else set()  # a Streams scenario's task count
        assert set(props[section]["properties"]) == keys | extra, section


def test_every_shipped_example_validates():
    for path in sorted(EXAMPLES.rglob("*.toml")):
        errors = [e.message for e in VALIDATOR.iter_errors(tomllib.loads(path.read_text()))]
        assert not errors, (path.name, errors)


def test_an_unknown_key_is_refused():
    data = tomllib.loads((EXAMPLES / "default.toml").read_text())
    data["faults"]["budgett"] = 1
    assert not VALIDATOR.is_valid(data)
