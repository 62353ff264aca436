"""The first failure of a job, from its pods and Jobs (scheduling/observe/failure.py)."""
import pytest

from scheduling.observe.failure import first_failure


def pod(name, pod_set="worker", index=0, containers=(), phase="Failed", reason="", message="", init=()):
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "labels": {"gangweb.io/pod-set": pod_set},
                         "annotations": {"batch.kubernetes.io/job-completion-index": str(index)}},
            "status": {"phase": phase, "reason": reason, "message": message,
                       "containerStatuses": list(containers), "initContainerStatuses": list(init)}}


def ended(name, code, reason="Error", at="2026-12-06T08:00:10Z", message="", last=False, signal=None):
    term = {"exitCode": code, "reason": reason, "finishedAt": at, "message": message}
    if signal is not None:
        term["signal"] = signal
    state = {"lastState": {"terminated": term}, "state": {"running": {}}} if last else {"state": {"terminated": term}}
    return {"name": name, "restartCount": 2 if last else 0, **state}


def failed_job(reason="BackoffLimitExceeded", pod_set="worker"):
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j", "labels": {"gangweb.io/pod-set":
                                                                                        pod_set}},
            "status": {"conditions": [{"type": "Failed", "status": "True", "reason": reason,
                                       "message": "Job has reached the specified backoff limit",
                                       "lastTransitionTime": "2026-12-06T08:00:12Z"}]}}


def test_the_earliest_failed_container_is_named_with_its_pod_set_index_and_exit_code():
    pods = [pod("j-worker-1", index=1, containers=[ended("trainer", 3, at="2026-12-06T08:00:09Z",
                                                         message="loss is NaN\n")]),
            pod("j-worker-0", index=0, containers=[ended("trainer", 137, at="2026-12-06T08:00:11Z")]),
            pod("j-ps-0", pod_set="ps", phase="Running", containers=[{"name": "ps", "state": {"running": {}}}])]
    f = first_failure(pods, [failed_job()])
    assert (f["kind"], f["pod_set"], f["index"], f["pod"], f["container"], f["exit_code"], f["reason"]) == (
        "ExitCode", "worker", 1, "j-worker-1", "trainer", 3, "Error")
    assert f["message"] == "loss is NaN\n"
    assert f["job_reason"] == "BackoffLimitExceeded"
    assert f["failed_pods"] == 2
    assert f["summary"] == "worker[1] container trainer exited with code 3 (Error): loss is NaN"


@pytest.mark.parametrize(("container", "pod_kwargs", "kind", "reason", "code"), [
    (ended("t", 137, reason="OOMKilled"), {}, "OOMKilled", "OOMKilled", 137),
    (ended("t", 1, last=True), {"phase": "Running"}, "ExitCode", "Error", 1),
    ({"name": "t", "state": {"waiting": {"reason": "ImagePullBackOff", "message": "Back-off pulling image x"}}},
     {"phase": "Pending"}, "ImagePull", "ImagePullBackOff", None),
    (None, {"reason": "Evicted", "message": "The node was low on resource: memory."}, "Evicted", "Evicted", None),
    (None, {"reason": "DeadlineExceeded"}, "DeadlineExceeded", "DeadlineExceeded", None),
])
def test_each_kind_of_failure_is_named(container, pod_kwargs, kind, reason, code):
    f = first_failure([pod("p", containers=[container] if container else [], **pod_kwargs)], [])
    assert (f["kind"], f["reason"], f["exit_code"]) == (kind, reason, code)


def test_a_container_that_completed_is_no_failure():
    assert first_failure([pod("p", phase="Succeeded", containers=[ended("t", 0, reason="Completed")])], []) is None


def test_only_the_job_condition_says_something():
    f = first_failure([], [failed_job("DeadlineExceeded", pod_set="ps")])
    assert (f["kind"], f["pod_set"], f["reason"], f["container"]) == ("JobFailed", "ps", "DeadlineExceeded", "")
    assert "the Job failed (DeadlineExceeded)" in f["summary"]


def test_hostile_values_are_bounded_and_never_raise():
    bad = {"metadata": {"name": ["x"], "annotations": {"batch.kubernetes.io/job-completion-index": "9" * 40}},
           "status": {"phase": "Failed", "containerStatuses": [
               "junk", {"name": 5, "state": {"terminated": {"exitCode": True, "reason": "E" * 999,
                                                           "message": "m" * 10_000, "finishedAt": "never"}}}]}}
    f = first_failure([bad], [])
    assert f["index"] is None and f["pod"] == "" and f["exit_code"] is None
    assert len(f["reason"]) == 128 and len(f["message"]) == 1024


def test_a_pod_killed_because_it_is_being_deleted_is_no_failure():
    killed = pod("p", containers=[ended("t", 137)])
    killed["metadata"]["deletionTimestamp"] = "2026-12-06T08:00:20Z"
    assert first_failure([killed], []) is None
