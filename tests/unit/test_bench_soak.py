"""The soak's count of resync passes that ran at once (bench/soak.py): runs, not prefetched tasks."""
from bench.soak import resyncs_at_once

RECEIVED = "[2026-12-02 12:00:00,000: INFO/MainProcess] Task scheduling.resync_cluster[a{n}] received"


def _done(at: str, process: str, n: int, seconds: float) -> str:
    return (f"[2026-12-02 {at},000: INFO/{process}] Task scheduling.resync_cluster[a{n}] succeeded in "
            f"{seconds}s: None")


def test_two_passes_whose_runs_overlap_count_two():
    log = "\n".join([RECEIVED.format(n=1), RECEIVED.format(n=2),
                     _done("12:01:00", "ForkPoolWorker-1", 1, 50.0),   # ran 12:00:10-12:01:00
                     _done("12:01:30", "ForkPoolWorker-2", 2, 60.0)])  # ran 12:00:30-12:01:30
    assert resyncs_at_once(log) == 2


def test_prefetched_tasks_and_lease_skips_do_not_count():
    skip = ("[2026-12-02 12:00:40,000: INFO/ForkPoolWorker-2] resync of cluster local skipped: another resync of it "
            "is running")
    log = "\n".join([RECEIVED.format(n=n) for n in range(1, 5)] + [
        skip, _done("12:00:40", "ForkPoolWorker-2", 2, 0.01),        # skipped by the lease, inside pass 1
        _done("12:01:00", "ForkPoolWorker-1", 1, 50.0),              # ran 12:00:10-12:01:00
        _done("12:02:00", "ForkPoolWorker-1", 3, 30.0)])             # ran 12:01:30-12:02:00
    assert resyncs_at_once(log) == 1
