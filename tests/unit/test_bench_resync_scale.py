"""The resync-by-size benchmark's arithmetic (bench/resync_scale.py): spread of rounds and the issue 36 goals."""
from bench import resync_scale


def rounds(seconds, peaks, jobs):
    return [{"jobs": jobs, "acted": 0, "failed": 0, "by_request": {}, "seconds": s, "ms_per_job": s * 1000 / jobs,
             "cpu_s": s / 2, "cpu_ms_per_job": s * 500 / jobs,
             "peak_rss_mib": p, "rss_before_mib": 120.0, "requests": 9, "bytes_listed": 10, "server_cpu_s": 1.0,
             "load_before": 2.0, "load_after": 2.5} for s, p in zip(seconds, peaks, strict=True)]


def test_the_spread_of_three_rounds_is_their_min_median_and_max():
    assert resync_scale.spread(rounds([3.0, 1.0, 2.0], [1, 1, 1], 1000), "seconds") == {
        "min": 1.0, "median": 2.0, "max": 3.0}


def test_the_goals_compare_the_largest_size_with_the_smallest_on_medians():
    sizes = {1000: {"new": resync_scale.summarize(rounds([2.0, 2.2, 1.8], [140, 141, 139], 1000))},
             50000: {"new": resync_scale.summarize(rounds([140.0, 150.0, 160.0], [160, 170, 180], 50000))}}
    goals = resync_scale.goals(sizes)
    assert goals["rss_ratio"] == 1.21 and not goals["rss_ok"]  # 170 / 140
    assert goals["ms_per_job_ratio"] == 1.5 and goals["ms_per_job_ok"]  # 3.0 / 2.0 ms a job
    assert goals["nothing_acted"]
