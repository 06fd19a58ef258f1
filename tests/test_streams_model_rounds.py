"""The model's rounds that the Streams scenarios are compared with (tests/catalogue/
streams_model.py) for the events of a host swap (one member leaves, a new one joins) and
a leader crash during scaling, on the model's high-availability assignor (R57-R60)."""
from catalogue.streams_model import model_rounds

# A and B share six tasks, each with standbys of the other's
BEFORE = {"A": (0b000111, 0b111000), "B": (0b111000, 0b000111)}


def _active(round_: dict) -> dict:
    return {n: len(m["active"]) for n, m in round_["members"].items()}


def test_a_host_swap_leaves_in_a_round_of_its_own_then_the_newcomer_warms_up():
    rounds = model_rounds("high-availability", 6, 1, 2, BEFORE, ["C"], ["B"])
    assert rounds[0]["event"] == "B leaves" and _active(rounds[0]) == {"A": 6}
    assert rounds[1]["event"] == "C joins" and _active(rounds[1]) == {"A": 6, "C": 0}
    assert rounds[1]["members"]["C"]["warmup"] and rounds[1]["probing"]
    assert _active(rounds[-1]) == {"A": 3, "C": 3}


def test_a_leader_crash_comes_once_the_join_settles_and_the_rest_finish_the_scaling():
    rounds = model_rounds("high-availability", 6, 1, 2, BEFORE, ["C"], [], "A")
    assert rounds[0]["event"] == "C joins" and _active(rounds[0]) == {"A": 3, "B": 3, "C": 0}
    assert rounds[1]["event"].startswith("A, the leader, crashes") and _active(rounds[1]) == {"B": 6, "C": 0}
    assert _active(rounds[-1]) == {"B": 3, "C": 3}
    without = model_rounds("high-availability", 6, 1, 2, BEFORE, ["C"])
    assert _active(without[-1]) == {"A": 2, "B": 2, "C": 2}
