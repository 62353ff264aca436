"""A bulk batch leaves one start and one end line in the worker log, key=value, which bench/ reads to say where a
round's time went (its queue wait, the snapshot, the passes, the client rate limit). The batch runs against a real
closed port (tests/unit/test_reconcile_offline.py's unreachable cluster), so every pass is recorded as failed."""
import logging
import re

from scheduling.reconcile import jobs
from tests.unit.test_reconcile_offline import dead_cluster, submit  # noqa: F401 - the fixture is used by name

FIELD = re.compile(r"(\w+)=(\S+)")


def test_a_batch_logs_its_start_and_end_with_counts_and_timings(api, dead_cluster, caplog):  # noqa: F811
    batch = [submit(api, *dead_cluster, f"logged-{i}") for i in range(3)]
    with caplog.at_level(logging.INFO, logger="scheduling.reconcile.jobs.batch"):
        jobs.reconcile_many([j.pk for j in batch])
    lines = [r.getMessage() for r in caplog.records if r.name == "scheduling.reconcile.jobs.batch"]
    assert [line.split(":")[0] for line in lines] == ["reconcile batch start", "reconcile batch end"]
    start, end = (dict(FIELD.findall(line)) for line in lines)
    assert (start["jobs"], start["first"]) == ("3", str(batch[0].pk))
    assert 0 <= float(start["waited_s"]) < 600
    assert (end["jobs"], end["ok"], end["failed"], end["requeued"]) == ("3", "0", "3", "0")
    assert float(end["total_s"]) >= float(end["read_s"]) >= 0
    assert float(end["throttle_wait_s"]) == 0.0 and end["throttle_waits"] == "0"
    assert float(end["at"]) >= float(start["at"])
