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
