"""The Performance table's rows of issue 36's benchmarks (bench/table.py): goals judged on the team users, every
figure with its load."""
from bench.table import rows


def _fig(p50, p99, ok):
    return {"warm": {"n": 200, "p50_ms": p50, "p99_ms": p99, "max_ms": p99 + 1},
            "cold": {"n": 3, "p50_ms": 120.0, "p99_ms": None, "max_ms": 400.0},
            "spread_round_p50_ms": {"min": p50 - 5, "median": p50, "max": p50 + 5}, "ok": ok}


def test_http_pages_rows_judge_the_team_users_and_only_report_the_superuser():
    rounds = [{"load_average_before": [4.5, 3, 2], "load_average_after": [6.25, 3, 2], "machine_busy_pct": 71.0}]
    results = {"http_pages": {"jobs": 100_000, "seeds": {"aged": {"rounds": rounds, "users": {
        "superuser": {"jobs list": _fig(400.0, 900.0, False)},
        "team viewer": {"jobs list": _fig(60.0, 310.0, False), "cold, every kind": {"cold": {}}}}}}}}
    got = rows(results)
    assert [(r[0], r[4]) for r in got] == [
        ("HTTP page (aged table, 100,000 jobs): jobs list, superuser", "-"),
        ("HTTP page (aged table, 100,000 jobs): jobs list, team viewer", "**no**")]
    assert got[1][1].startswith("warm p50 60.0 ms, p99 310.0 ms (n=200")
    assert got[1][2] == "load 4.5-6.25, busy 71.0-71.0 %"


def test_running_raw_and_watch_replay_rows_carry_ratio_goal_and_load():
    side = {"load_average_before": [12.0, 1, 1]}
    results = {
        "running_raw": {"rounds": [{"gangweb": side, "raw client": {"load_average_before": [9.5, 1, 1]}}],
                        "jobs_per_round": 50, "pods_per_job": 4, "rate_per_s": 20.0, "ratio_p50": 1.29,
                        "ratio_spread": {"min": 0.94, "median": 0.99, "max": 1.4}, "goal_ratio": 1.5, "ok": True,
                        "sides": {"gangweb": {"p50_ms": 7297.6, "p99_ms": 13479.0},
                                  "raw client": {"p50_ms": 5667.4, "p99_ms": 10567.9}}},
        "watch_replay": {"jobs": 100, "goal_p99_s": 2.0, "goal_rate": 500, "replays": [
            {"rate_asked": 500, "rate_reached": 500.0, "lag": {"p50_s": 0.43, "p99_s": 1.84}, "lost": 0,
             "rows_not_matching_cache": 0, "load_average_before": [26.9, 1, 1], "load_average_after": [28.9, 1, 1],
             "machine_busy_pct": 100.0, "ok": True}]}}
    raw, replay = rows(results)
    assert raw[3] == "1.29x (rounds 0.94-1.4; goal <= 1.5x on an idle machine)" and raw[4] == "yes"
    assert "load 9.5-12.0" in raw[2]
    assert replay[3] == "p99 1.84 s (goal <= 2.0 s at >= 500/s)" and replay[2] == "load 26.9-28.9, busy 100.0 %"
