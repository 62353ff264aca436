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


def test_a_single_submits_task_logs_what_it_claimed_and_when(api, dead_cluster, caplog):  # noqa: F811
    waiting = [submit(api, *dead_cluster, f"claimed-{i}") for i in range(3)]
    with caplog.at_level(logging.INFO, logger="scheduling.reconcile.jobs.coalesce"):
        jobs.reconcile_submitted(waiting[1].pk, task_id="task-of-the-second")
        jobs.reconcile_submitted(waiting[1].pk, task_id="a-later-task")  # its pass failed: it rides in no batch
    lines = [dict(FIELD.findall(r.getMessage())) for r in caplog.records
             if r.getMessage().startswith("reconcile claim:")]
    assert [(x["job"], x["found"], x["jobs"]) for x in lines] == [
        (str(waiting[1].pk), "claimed", "3"), (str(waiting[1].pk), "claimed", "1")]
    assert lines[0]["ids"] == ",".join(str(j.pk) for j in (waiting[1], waiting[0], waiting[2]))
    assert 0 <= float(lines[0]["claim_s"]) < 600 and float(lines[1]["at"]) >= float(lines[0]["at"])
