"""The start-estimate benchmark's scoring against the fits-aware baseline (issue 35) and its spread over seeds."""
import math

import pytest

from bench.estimate_scoring import calibrate, calibrate_z, covered, fit_level, fits_aware_figures, spread, z_needed
from scheduling.queueing.estimate import ESTIMATED, NOW, Estimate

MIN = 60.0


def _scored():
    asked = {
        1: Estimate(NOW, p50=0.0, p90=0.0),  # fit at submit, started at once
        2: Estimate(ESTIMATED, p50=10 * MIN, p90=20 * MIN),  # waited 15 min: off by 5, within p90
        3: Estimate(ESTIMATED, p50=40 * MIN, p90=45 * MIN),  # waited 50 min: off by 10, past p90
        4: Estimate(ESTIMATED, p50=5 * MIN, p90=9 * MIN),  # no queue history of waits yet: left out
        5: Estimate(NOW, p50=0.0, p90=0.0),  # the bench's pass said it did not fit; never started
    }
    fits = {1: True, 2: False, 3: False, 4: False, 5: False}
    baseline = {1: 0.0, 2: 30 * MIN, 3: 30 * MIN, 4: None, 5: 30 * MIN}
    submitted = {1: 100.0, 2: 100.0, 3: 100.0, 4: 100.0, 5: 100.0}
    started = {1: 100.0, 2: 100.0 + 15 * MIN, 3: 100.0 + 50 * MIN, 4: 100.0 + 7 * MIN}
    return fits_aware_figures(asked, baseline, fits, submitted, started)


def test_jobs_that_waited_are_scored_against_the_median_wait_of_jobs_that_waited():
    waited = _scored()["waited"]
    assert (waited["jobs"], waited["estimate_p50_median_abs_error_min"], waited["baseline_median_abs_error_min"],
            waited["error_ratio"]) == (2, 7.5, 17.5, 0.429)
    assert (waited["p50_coverage_pct"], waited["p90_coverage_pct"], waited["median_wait_min"]) == (0.0, 50.0, 32.5)


def test_a_job_that_fits_counts_as_exactly_right_for_both_over_all_jobs():
    everyone = _scored()["all"]
    assert (everyone["jobs"], everyone["estimate_p50_median_abs_error_min"],
            everyone["baseline_median_abs_error_min"], everyone["error_ratio"]) == (3, 5.0, 15.0, 0.333)
    assert (everyone["p50_coverage_pct"], everyone["p90_coverage_pct"]) == (33.3, 66.7)


def test_goals_and_the_fits_check_disagreeing_with_the_estimators_now():
    scored = _scored()
    assert (scored["ratio_goal_met"], scored["p90_goal_met"], scored["fits_check_disagrees"]) == (True, False, 1)


def _seed(seed, ratio, p90):
    return {"seed": seed, "error_ratio": 0.3, "waiting_jobs": {"error_ratio": 0.6},
            "fits_aware": {"all": {"error_ratio": 0.8, "p90_coverage_pct": 85.0},
                           "waited": {"error_ratio": ratio, "p90_coverage_pct": p90, "jobs": 1000}}}


def test_spread_gives_min_median_max_and_goals_at_the_median_and_at_every_seed():
    summary = spread([_seed(1, 0.62, 89.0), _seed(2, 0.41, 91.5), _seed(3, 0.48, 93.0)])
    assert summary["seeds"] == [1, 2, 3]
    assert summary["fits_aware_ratio_waited"] == {"min": 0.41, "median": 0.48, "max": 0.62}
    assert summary["p90_coverage_waited_pct"] == {"min": 89.0, "median": 91.5, "max": 93.0}
    assert summary["p50_coverage_waited_pct"] is None  # no seed reported it
    assert (summary["ratio_goal_met_at_median"], summary["ratio_goal_met_every_seed"],
            summary["p90_goal_met_at_median"], summary["p90_goal_met_every_seed"]) == (True, False, True, False)


# Each waited job: [replays that started it before it really started, replays] (bench.estimate's waited_ranks).
RANKS = [[0, 100], [50, 100], [89, 100], [90, 100], [95, 100]]


def test_coverage_at_a_quantile_level_counts_the_real_starts_at_or_before_it():
    # At 0.9 the 90th of 100 replays: covered when fewer than 90 replays started earlier (3 of 5).
    assert (covered(RANKS, 0.9), covered(RANKS, 0.95), covered(RANKS, 1.0), covered([], 0.9)) == (
        60.0, 80.0, 100.0, None)


def test_the_p90_level_is_the_lowest_that_reaches_the_goal_on_the_fitting_seeds():
    assert (fit_level(RANKS, goal=60.0), fit_level(RANKS, goal=80.0), fit_level(RANKS)) == (0.895, 0.905, 0.955)


def test_calibration_fits_on_some_seeds_and_reports_on_the_others():
    fit = [{"seed": 1, "fits_aware": {"waited_ranks": RANKS}}]
    report = [{"seed": 4, "fits_aware": {"waited_ranks": [[94, 100], [96, 100]]}},
              {"seed": 5, "fits_aware": {"waited_ranks": [[10, 100], [20, 100]]}}]
    got = calibrate(fit, report)
    assert (got["level"], got["fit_pooled_at_level"]) == (0.955, 100.0)
    assert got["report_seeds"] == [{"seed": 4, "at_0.9": 0.0, "at_level": 50.0},
                                   {"seed": 5, "at_0.9": 100.0, "at_level": 100.0}]
    assert got["report_p90_coverage_waited_pct"] == {"min": 50.0, "median": 75.0, "max": 100.0}
    assert (got["p90_goal_met_at_median"], got["p90_goal_met_every_seed"]) == (False, False)


STARTS = [600.0, 1200.0, 2400.0]  # replays' starts: 10, 20, 40 min; log sd = ln 2 x sqrt(2/3) = 0.566


def test_z_needed_is_how_far_above_the_replays_log_mean_the_real_start_was_in_their_log_sd():
    assert z_needed(3600.0, STARTS) == pytest.approx(math.log(3) / (math.log(2) * math.sqrt(2 / 3)))  # 1.941
    assert z_needed(2000.0, STARTS) == -math.inf  # within the replays' own 0.9 quantile (40 min)
    assert z_needed(5000.0, [1200.0] * 5) == math.inf  # replays that all agree cannot be widened


def test_p90_z_is_fitted_on_some_seeds_and_its_coverage_reported_on_the_others():
    fit = [{"seed": 1, "waited": [[2000.0, STARTS], [3600.0, STARTS]]}]
    report = [{"seed": 4, "waited": [[3000.0, STARTS], [5000.0, STARTS]]}]  # z needed 1.62 and 2.52
    got = calibrate_z(fit, report)
    assert (got["z"], got["fit_pooled_pct"]) == (1.95, 100.0)
    assert got["report_seeds"] == [{"seed": 4, "jobs": 2, "at_0.9": 0.0, "at_z": 50.0}]
    assert got["report_p90_coverage_waited_pct"] == {"min": 50.0, "median": 50.0, "max": 50.0}
