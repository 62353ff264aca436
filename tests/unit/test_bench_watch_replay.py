"""The watch replay (bench/watch_replay.py): what a job row must say of each pod once the replay drained."""
from bench.watch_replay import expected_reason


def test_the_pod_row_says_crash_loop_only_while_the_container_waits_in_it():
    crashing = {"status": {"containerStatuses": [{"state": {"waiting": {"reason": "CrashLoopBackOff"}}}]}}
    running = {"status": {"containerStatuses": [{"state": {"running": {"startedAt": "2026-12-06T16:00:00Z"}}}]}}
    assert [expected_reason(crashing), expected_reason(running), expected_reason({})] == ["CrashLoopBackOff", "", ""]
