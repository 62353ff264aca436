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
