"""Issue 41 item 6: a simulation campaign covers every cell of its grid or is refused with
the smallest --runs that does, its default --runs covers any grid, and each cell's statistic
comes with a 95% interval (the plots draw it, with n)."""
import json
import statistics

import pytest

from conftest import run_cli
from rebalance.checker.campaign import Campaign, default_runs, interval
from rebalance.checker.streams_simulation import StreamsCampaign
from rebalance.model.config import ConfigError


def test_too_few_runs_are_refused_with_the_smallest_that_covers_the_grid(tmp_path):
    code, out, err = run_cli("simulate", "--out", tmp_path / "r", "--runs", "60", "--json", cwd=tmp_path)
    assert code == 2 and "give --runs 144 or more" in json.loads(out)["error"]["message"], err  # 6 x 3 x 4 x 2
    assert not (tmp_path / "r").exists()
    code, out, err = run_cli("simulate", "--streams", "--out", tmp_path / "s", "--runs", "7", "--json", cwd=tmp_path)
    assert code == 2 and "give --runs" in err and "situations × sizes × variants" in err


def test_every_cell_gets_runs_when_the_grid_is_covered():
    campaign = Campaign(runs=144, seed=1)
    campaign.validate()
    cells = {(sit, proto, static, m, p) for _, sit, proto, static, m, p, _ in campaign.specs()}
    assert len(cells) == len(campaign.grid()) == 144
    with pytest.raises(ConfigError, match="give --runs 144"):
        Campaign(runs=143, seed=1).validate()
    streams = StreamsCampaign(runs=len(StreamsCampaign(runs=1, seed=1).grid()), seed=1)
    streams.validate()


@pytest.mark.parametrize("cells", [1, 7, 144, 1000, 1440])
def test_the_default_runs_are_a_multiple_of_the_cells_and_at_least_1000(cells):
    runs = default_runs(cells)
    assert runs % cells == 0 and 1000 <= runs < 1000 + cells


def test_intervals_of_the_mean_and_of_the_median():
    values = sorted([3, 5, 4, 6, 5, 4, 5, 7, 2, 5])
    low, high = interval(values, "mean")
    half = 1.96 * statistics.stdev(values) / len(values) ** 0.5
    assert (low, high) == pytest.approx((4.6 - half, 4.6 + half))
    low, high = interval(list(range(100)), "median")  # ranks 50 -+ 9.8: the order statistics 40 and 59
    assert (low, high) == (40, 59)
    assert interval([], "mean") == (None, None) and interval([8], "mean") == (8, 8)
