"""One unit style for people on every dashboard page (issue 19, part 6): GPUs, CPU cores, GiB, from KAI units
(devices, millicores, MB = 10^6 bytes) or Kubernetes base units (devices, cores, bytes)."""
import pytest
from django.template import Context, Template

from scheduling.views.display import for_people, kai_raw, quota_bar
from scheduling.views.why_pending import amount


@pytest.mark.parametrize(("resource", "value", "units", "words"), [
    ("gpu", 3, "kai", "3 GPUs"),
    ("gpu", 1, "kai", "1 GPU"),
    ("gpu", 0.5, "kai", "0.5 GPU"),
    ("nvidia.com/gpu", 8, "base", "8 GPUs"),
    ("cpu", 8500, "kai", "8.5 CPU cores"),
    ("cpu", 1000, "kai", "1 CPU core"),
    ("cpu", 250, "kai", "0.25 CPU cores"),
    ("cpu", 12, "base", "12 CPU cores"),
    ("memory", 7785, "kai", "7.25 GiB"),  # 7,424 MiB = 7,784.63 MB, rounded up to whole MB by KAI units
    ("memory", 68720, "kai", "64 GiB"),  # 64Gi as the queue form stores it (rounded up to whole MB)
    ("memory", 100, "kai", "95.37 MiB"),
    ("memory", 96 * 2**30, "base", "96 GiB"),
    ("memory", 512, "base", "512 bytes"),
    ("memory", 0, "kai", "0 GiB"),
    ("cpu", -1, "kai", "unlimited"),
    ("memory", None, "kai", "?"),
    ("example.com/fpga", 2, "base", "2 example.com/fpga"),
], ids=lambda v: str(v))
def test_every_amount_reads_in_the_one_style(resource, value, units, words):
    assert for_people(resource, value, units) == words


GIB = 2**30


@pytest.mark.parametrize(("resource", "value", "units", "words"), [
    ("memory", 0, "base", "0 GiB"),
    ("memory", 1.5 * GIB, "base", "1.5 GiB"),
    ("memory", 1023 * GIB, "base", "1,023 GiB"),
    ("memory", 1024 * GIB, "base", "1,024 GiB"),
    ("memory", 1020 * GIB, "base", "1,020 GiB"),  # was "1.02e+03 GiB" in why-pending and submit warnings
    ("memory", 1e6 * GIB, "base", "1,000,000 GiB"),
    ("memory", 1023.6 * GIB, "base", "1,024 GiB"),  # above 100, fractions of a GiB are noise
    ("cpu", 1, "kai", "0.001 CPU cores"),  # one millicore never reads as 0
    ("cpu", 15, "kai", "0.015 CPU cores"),
    ("cpu", 333, "kai", "0.33 CPU cores"),
    ("cpu", 1500, "kai", "1.5 CPU cores"),
    ("cpu", 2_000_000, "kai", "2,000 CPU cores"),
    ("cpu", 0.25, "base", "0.25 CPU cores"),
    ("gpu", 0, "kai", "0 GPUs"),
    ("gpu", 0.25, "kai", "0.25 GPU"),
    ("nvidia.com/gpu", 1_000_000, "base", "1,000,000 GPUs"),
], ids=lambda v: str(v))
def test_large_and_small_amounts_read_without_an_exponent(resource, value, units, words):
    assert for_people(resource, value, units) == words


@pytest.mark.parametrize(("resource", "value", "words"), [
    ("memory", 1020 * GIB, "1,020 GiB of memory"),
    ("memory", 1e6 * GIB, "1,000,000 GiB of memory"),
    ("memory", 0.5 * GIB, "0.5 GiB of memory"),
    ("memory", 5 * 2**20, "5 MiB of memory"),
    ("memory", 512, "512 bytes of memory"),
    ("cpu", 2_000_000.0, "2,000,000 CPU cores"),
    ("cpu", 0.001, "0.001 CPU cores"),
    ("nvidia.com/gpu", 16, "16 GPUs"),
    ("nvidia.com/gpu", 1, "1 GPU"),
    ("nvidia.com/gpu", None, "? GPUs"),
    ("example.com/fpga", 1_500_000.0, "1,500,000 example.com/fpga"),
], ids=lambda v: str(v))
def test_why_pending_and_submit_warnings_say_amounts_in_the_same_style(resource, value, words):
    from scheduling.observe.why_pending import amount as observed_amount

    assert observed_amount(resource, value) == words


def test_a_cluster_too_small_warning_reads_gib_with_separators():
    from scheduling.models import Cluster
    from scheduling.services.clusters import warnings as cluster_warnings
    from tests import builders

    cluster = Cluster(id=1, name="gpu-a", capacity={"nodes": 2, "allocatable": {"cpu": 64, "memory": 1020 * GIB},
                                                    "largest": {"cpu": 32, "memory": 510 * GIB}})
    spec = builders.template_spec(pod_sets=[builders.pod_set(replicas=3, containers=[
        builders.container(memory="500Gi")])])
    [warning] = cluster_warnings.submit_warnings(cluster, spec)
    assert warning["code"] == "NeverFitsCluster"
    assert "1,500 GiB of memory in all" in warning["message"] and "have 1,020 GiB of memory together" in warning[
        "message"]


def test_the_template_filter_and_why_pending_use_the_same_formatter():
    html = Template('{% load gangweb %}{{ a.gpu|amount:"gpu" }} · {{ a.cpu|amount:"cpu" }} · '
                    '{{ a.memory|amount:"memory" }}').render(Context({"a": {"gpu": 3.0, "cpu": 8500.0,
                                                                              "memory": 7785.0}}))
    assert html == "3 GPUs · 8.5 CPU cores · 7.25 GiB"
    assert amount("cpu", 8.5) == "8.5 CPU cores" and amount("memory", 96 * 2**30) == "96 GiB"


def test_kai_raw_units_are_kept_for_the_kai_value_itself():
    assert [kai_raw("cpu", 8000), kai_raw("memory", 8590), kai_raw("gpu", 2), kai_raw("cpu", -1)] == [
        "8,000 millicores", "8,590 MB", "2 devices", "-1 (unlimited)"]


def test_an_unlimited_limit_is_not_a_region_and_says_unlimited():
    bar = quota_bar("cpu", "", quota=4000, limit=-1, allocated=2000, requested=3000)
    assert bar.unlimited and bar.limit_pct == 0.0
    assert "limit unlimited" in bar.summary
    finite = quota_bar("cpu", "", quota=4000, limit=6000, allocated=2000, requested=3000)
    assert not finite.unlimited and finite.limit_pct == pytest.approx(6000 / 6600 * 100, abs=1e-3)


@pytest.mark.parametrize("quota", [0, -1], ids=["quota-not-set", "quota-unlimited"])
def test_a_resource_without_a_quota_is_never_over_quota(quota):
    bar = quota_bar("memory", "", quota=quota, limit=-1, allocated=16000, requested=16000)
    assert (bar.quota_set, bar.over_quota, bar.over_pct, bar.quota_pct) == (False, False, 0.0, 0.0)
    assert bar.summary.startswith("no quota ·" if quota == 0 else "quota unlimited ·")


def test_allocated_beyond_a_set_quota_is_over_quota():
    bar = quota_bar("gpu", "", quota=2, limit=8, allocated=5, requested=5)
    assert bar.over_quota and bar.over_pct == pytest.approx(bar.allocated_pct - bar.quota_pct)


def test_the_svg_draws_no_limit_region_no_quota_mark_and_no_over_part_where_none_applies():
    from scheduling.templatetags.gangweb import quota_bar_svg
    html = quota_bar_svg(quota_bar("memory", "", quota=0, limit=-1, allocated=16000, requested=16000))
    assert 'data-limit="unlimited"' in html and 'data-over-quota="no"' in html
    assert "q-limit" not in html and "q-over" not in html and "q-quota" not in html and "q-unlimited" in html
    html = quota_bar_svg(quota_bar("gpu", "", quota=2, limit=8, allocated=5, requested=5))
    assert 'data-over-quota="yes"' in html and "q-over" in html and "q-limit" in html and "q-quota" in html
