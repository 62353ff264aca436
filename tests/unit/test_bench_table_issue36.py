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


def _submit_user(rate, ratio, queries, low, high):
    one = {"jobs_per_s": rate, "p50_ms": 50.0, "p99_ms": 80.0, "spread_ratio": {"min": low, "max": high}}
    bulk = {"jobs_per_s": rate * 20, "p50_ms": 230.0, "spread_jobs_per_s": {"min": rate * 19, "max": rate * 21}}
    return {"single": one, "bulk": bulk, "single_ratio": ratio, "bulk_ratio": 0.13,
            "queries": {"single": queries, "bulk": queries + 1}}


def test_submit_rows_judge_the_team_submitter_first_and_report_the_superuser_with_load_and_spread():
    results = {"submit": {
        "goal_user": "team submitter", "single_ok": False, "bulk_ok": True, "threads": 8, "single_rounds": 20,
        "bulk_threads": 2, "bulk_batch": 500, "bulk_rounds": 3, "load_average_before": [0.63, 1, 1],
        "load_average_after": [1.37, 1, 1], "baseline_single": {"jobs_per_s": 375.2, "p50_ms": 20.3},
        "baseline_bulk": {"jobs_per_s": 26457.6},
        "users": {"superuser": _submit_user(206.7, 0.55, 9, 0.48, 0.65),
                  "team submitter": _submit_user(147.1, 0.39, 14, 0.36, 0.44)}}}
    got = rows(results)
    assert [(r[0], r[4]) for r in got] == [
        ("Submit, single (8 clients x 20 rounds), team submitter", "**no**"),
        ("Submit, bulk (2 clients x 500, 3 rounds), team submitter", "yes"),
        ("Submit, single (8 clients x 20 rounds), superuser", "-"),
        ("Submit, bulk (2 clients x 500, 3 rounds), superuser", "-")]
    assert got[0][1] == "147.1 jobs/s, p50 50.0 ms, p99 80.0 ms, 14 queries"
    assert got[0][3] == "0.39x (rounds 0.36-0.44; goal >= 0.5x)"
    assert got[2][3] == "0.55x (rounds 0.48-0.65; goal >= 0.5x, reported)"
    assert got[0][2].endswith("; load 0.63-1.37")


def test_in_process_page_rows_per_user_judge_the_team_viewer():
    def page(p99, ok, queries):
        return {"p50_ms": 40.0, "p99_ms": p99, "samples": 60, "queries": queries, "ok": ok,
                "spread_round_p50_ms": {"min": 35.0, "max": 47.0}}
    results = {"pages": {"jobs": 1_000_000, "users": {
        "load_average_before": [4.23, 1, 1], "load_average_after": [2.78, 1, 1],
        "pages": {"jobs list, deep page": {"superuser": page(261.2, True, 6), "team viewer": page(313.3, False, 11)}}}}}
    got = rows(results)
    assert [(r[0], r[4]) for r in got] == [
        ("Page, per user (1,000,000 jobs): jobs list, deep page, team viewer", "**no**"),
        ("Page, per user (1,000,000 jobs): jobs list, deep page, superuser", "-")]
    assert got[0][1] == "p50 40.0 ms, p99 313.3 ms (n=60, round p50s 35.0-47.0), 11 queries"
    assert got[0][2] == "load 2.78-4.23" and got[1][3].endswith("(reported)")


def test_the_repair_row_judges_its_p99_with_the_load():
    results = {"repair": {"edits": 60, "repaired": 60, "p50_s": 0.108, "p99_s": 0.212, "goal_p99_s": 2.0,
                          "ok": True, "load_average": [2.25, 2.79, 3.12]}}
    (row,) = rows(results)
    assert row[1] == "60/60 repaired, p50 0.108 s, p99 0.212 s"
    assert row[2] == "no resync (the watch alone); load 2.25-2.25" and row[3:] == ("p99 0.212 s (goal <= 2.0 s)", "yes")
