"""A failed job's page in the browser: the failure (pod set, index, container, exit code 3, its message) and the
logs panel with the failed container's last lines; screenshot docs/screenshots/job-failed.png. The logs come from
a stand-in for the cluster read here (the real path through kube-apiserver and kwok:
tests/cluster/test_failure_and_logs.py)."""
import pytest

from scheduling.choices import GangPhase
from scheduling.models import GangJob
from scheduling.services.jobs import events
from scheduling.services.jobs import logs as job_logs
from tests.ui import demo
from tests.ui.browser import screenshot

pytestmark = [pytest.mark.ui, pytest.mark.django_db(transaction=True)]

FAILURE = {"kind": "ExitCode", "pod_set": "worker", "index": 1, "pod": "bert-eval-2-worker-1-7xk2q",
           "container": "trainer", "init_container": False, "exit_code": 3, "signal": None, "reason": "Error",
           "message": "RuntimeError: loss is NaN at step 1200", "restarts": 0, "at": "2026-12-06T07:12:41+00:00",
           "job_reason": "BackoffLimitExceeded", "job_message": "Job has reached the specified backoff limit",
           "failed_pods": 1, "summary": "worker[1] container trainer exited with code 3 (Error): RuntimeError: "
                                        "loss is NaN at step 1200"}
LOG = ("step 1100 loss 2.114 lr 3.0e-4\nstep 1150 loss 2.097 lr 3.0e-4\nstep 1200 loss nan lr 3.0e-4\n"
       "Traceback (most recent call last):\n  File \"train.py\", line 212, in <module>\n"
       "RuntimeError: loss is NaN at step 1200\n")


def test_a_failed_jobs_page_shows_the_exit_code_and_the_log_tail(admin_page, admin_user, monkeypatch):
    demo.populate(admin_user)
    job = GangJob.objects.get(name="bert-eval-2")
    assert job.phase == GangPhase.FAILED
    GangJob.objects.filter(pk=job.pk).update(observed={**(job.observed or {}), "failure": FAILURE},
                                             phase_message="Job has reached the specified backoff limit")
    asked = []

    def read(j, query, api=None):
        asked.append((j.pk, query))
        return job_logs.LogAnswer(pod=FAILURE["pod"], container="trainer", pod_set="worker", index=1,
                                  body=LOG.encode())

    monkeypatch.setattr(job_logs, "read", read)
    monkeypatch.setattr(events, "job_events", lambda j, api=None: [])  # the demo cluster has no API server
    page = admin_page
    page.goto(f"/jobs/{job.pk}/")
    failure = page.locator("#job-failure")
    assert "worker[1] container trainer exited with code 3 (Error)" in failure.inner_text()
    assert failure.locator("[data-field=exit_code]").inner_text() == "3"
    assert failure.locator("[data-field=index]").inner_text() == "1"
    page.locator("#job-logs").get_by_text("RuntimeError: loss is NaN at step 1200").first.wait_for()
    assert "container trainer in pod bert-eval-2-worker-1-7xk2q (worker[1])" in page.inner_text("#job-logs-source")
    assert asked and asked[0][0] == job.pk and asked[0][1].tail_lines == 200
    screenshot(page, "job-failed")
    page.goto("/")
    assert "worker[1] container trainer exited with code 3" in page.inner_text("#h-failures >> xpath=..")
    assert not page.js_errors
