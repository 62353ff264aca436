"""Object names: deterministic, hashed by job UID and generation, valid and short enough everywhere."""
import re
import uuid

import pytest

from scheduling.reconcile import names

DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
DNS1035 = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
UID = uuid.UUID("12345678-1234-5678-1234-567812345678")


def test_names_are_deterministic_per_uid_and_generation():
    assert names.gang_name("train", UID, 0) == names.gang_name("train", UID, 0)
    assert names.gang_name("train", UID, 0) != names.gang_name("train", UID, 1)
    assert names.gang_name("train", UID, 0) != names.gang_name("train", uuid.uuid4(), 0)
    assert names.gang_name("train", UID, 0).startswith("train-")


@pytest.mark.parametrize("job_name", ["a" * 60, "x" + "-1" * 30 + "z"[:0], "9" * 63, "a-" * 31 + "b", "t"])
def test_long_and_odd_job_names_give_valid_names(job_name):
    for gen in (0, 7):
        gang = names.gang_name(job_name, UID, gen)
        owner = names.owner_name(job_name, "worker-pool-abcdefgh", UID, gen)
        svc = names.service_name(job_name, UID, gen)
        assert DNS_LABEL.match(gang) and len(gang) <= 63
        assert DNS_LABEL.match(owner) and len(owner) <= names.JOB_NAME_MAX
        assert len(f"{owner}-9999") <= 63  # Indexed Job pod hostname
        assert DNS1035.match(svc) and len(svc) <= 63


def test_label_values_are_cut_to_63_and_end_alphanumeric():
    value = names.label_value("a" * 62 + "-b-c")
    assert len(value) <= 63 and value[-1].isalnum()
    assert names.label_value("ok.value_1") == "ok.value_1"


# Pod sets of at most 20 characters (the template limit) chosen to defeat any cut: equal 20-character prefixes
# apart from the last letter, one that repeats the job name's continuation, and a one-letter one.
LONG_POD_SETS = ["worker-pool-aaaaaaaa", "worker-pool-aaaaaaab", "b-c", "c", "w"]


@pytest.mark.parametrize("job_name", [
    "a" * 42,                      # the issue's example: 42 characters cut the pod-set name off entirely
    "a" * 63,                      # the longest job name
    "aaa-b-c" + "x" * 56,          # cut points where "<job cut>-b-c" could read as "<longer job cut>-c"
    "x" + "-b-c" * 15 + "q",
    "j" * 36,                      # "<job>-<pod set>" fits for short pod sets and not for long ones
])
def test_every_pod_set_of_a_long_named_job_gets_its_own_indexed_job_name(job_name):
    assert len(job_name) <= 63
    for gen in (0, 3):
        got = names.owner_names(job_name, LONG_POD_SETS, UID, gen, recorded={})
        assert len(set(got.values())) == len(LONG_POD_SETS), got
        for pod_set, name in got.items():
            assert DNS_LABEL.match(name) and len(name) <= names.JOB_NAME_MAX, name
            assert len(f"{name}-9999") <= 63  # the pod hostname and batch.kubernetes.io/job-name label value
            assert pod_set in name  # the pod-set name is never cut
        other_job = names.owner_names(job_name, LONG_POD_SETS, uuid.UUID(int=7), gen, recorded={})
        assert not set(got.values()) & set(other_job.values())


def test_the_issue_example_no_longer_gives_both_pod_sets_one_name():
    job = "a" * 42
    assert names.legacy_owner_name(job, "launcher", UID, 0) == names.legacy_owner_name(job, "worker", UID, 0)
    launcher, worker = names.owner_name(job, "launcher", UID, 0), names.owner_name(job, "worker", UID, 0)
    assert launcher != worker
    assert launcher.startswith("a" * 34 + "-launcher-") and len(launcher) == 52
    assert worker.startswith("a" * 36 + "-worker-") and len(worker) == 52


def test_names_that_fit_are_what_they_were_before():
    for job, pod_set in [("train", "worker"), ("j" * 30, "launcher"), ("a" * 36, "worker")]:
        assert len(f"{job}-{pod_set}") <= 43
        assert names.owner_name(job, pod_set, UID, 0) == names.legacy_owner_name(job, pod_set, UID, 0)
    assert names.owner_name("train", "worker", UID, 0) == f"train-worker-{names.name_hash(UID, 0)}"


def test_a_running_job_keeps_an_old_cut_name_that_was_its_own_but_not_a_shared_one():
    job = "b" * 50
    old = names.legacy_owner_name(job, "worker", UID, 0)
    assert old != names.owner_name(job, "worker", UID, 0)
    # One pod set, created before the fix: its Indexed Job keeps its name (an upgrade restarts nothing).
    assert names.owner_names(job, ["worker"], UID, 0, recorded={old: "uid-1"}) == {"worker": old}
    new = {"worker": names.owner_name(job, "worker", UID, 0)}
    assert names.owner_names(job, ["worker"], UID, 0, recorded={}) == new
    assert names.owner_names(job, ["worker"], UID, 0, recorded=None) == new
    # Two pod sets that shared the old name (the defect): both get their own, the shared Job goes as stale.
    shared = names.legacy_owner_name(job, "launcher", UID, 0)
    assert shared == old
    got = names.owner_names(job, ["launcher", "worker"], UID, 0, recorded={shared: "uid-1"})
    assert old not in got.values() and len(set(got.values())) == 2
