"""The benchmark runner's pure helpers: percentiles, ratios and the Performance table."""
import pytest

from bench.common import percentile, ratio
from bench.table import END, START, render, update_readme


@pytest.mark.parametrize("values, q, expected", [
    ([], 50, 0.0),
    ([3.0], 99, 3.0),
    ([1, 2, 3, 4], 50, 2),
    ([1, 2, 3, 4, 5, 6, 7, 8, 9, 10], 50, 5),
    ([1, 2, 3, 4, 5, 6, 7, 8, 9, 10], 99, 10),
    (list(range(1, 101)), 99, 99),
])
def test_percentile_is_nearest_rank(values, q, expected):
    assert percentile(values, q) == expected


def test_ratio_rounds_to_two_places_and_survives_a_zero_baseline():
    assert (ratio(18.4, 56.5), ratio(5.0, 0)) == (0.33, 0.0)


def _document():
    return {"generated_at": "2026-11-29T15:00:00+00:00", "machine": {"cpus": 2, "python": "3.11.7"},
            "total_seconds": 612.0, "results": {
                "resync": {"baseline": {"requests": 8, "jobs": 102}, "ratio": 1.0, "ok": True,
                           "measured": {"requests": 8, "jobs": 502, "max_per_kind": 1}},
                "pages": {"baseline_jobs": 1000, "pages": {"API job detail": {
                    "p50_ms": 15.7, "queries": 4, "baseline_p50_ms": 15.8, "baseline_queries": 4, "ratio": 0.99,
                    "ok": True}}},
                "reconcile": {"error": "Traceback ..."}}}


def test_the_table_has_a_row_per_figure_and_names_failed_benchmarks():
    text = render(_document())
    assert "| Resync, nothing changed | 8 requests at 502 jobs (max 1/kind) | 8 requests at 102 jobs |" in text
    assert "| Page, superuser: API job detail | p50 15.7 ms, 4 queries | p50 15.8 ms, 4 queries at 1,000 jobs |" in text
    assert "Failed or skipped benchmarks: reconcile." in text


def test_update_readme_replaces_only_the_marked_block(tmp_path):
    readme = tmp_path / "README.md"
    readme.write_text(f"# x\n\n{START}\nold\n{END}\n\n## After\n")
    assert update_readme(readme, _document())
    text = readme.read_text()
    assert "old" not in text and text.endswith(f"{END}\n\n## After\n") and "Resync, nothing changed" in text
    other = tmp_path / "OTHER.md"
    other.write_text("no markers\n")
    assert not update_readme(other, _document()) and other.read_text() == "no markers\n"


def test_spread_is_min_median_max_and_rotation_changes_who_goes_first():
    from bench.common import rotated, spread

    assert spread([3.0, 1.0, 2.0, 10.0]) == {"min": 1.0, "median": 2.5, "max": 10.0}
    assert spread([]) == {"min": 0.0, "median": 0.0, "max": 0.0}
    assert [rotated(["b", "su", "team"], i)[0] for i in range(4)] == ["b", "su", "team", "b"]
