"""The pages-over-HTTP benchmark's helpers: latency summaries that say p99 only with enough samples, and the seed's
ageing (bench/seed.py `age_jobs`), which must touch exactly the rows its hash picks."""
from datetime import UTC, datetime

import pytest

from bench.common import latency_summary
from bench.seed import AGE_DELETE_SALT, AGE_UPDATE_SALT, age_jobs, picked
from scheduling.choices import GangPhase as P
from scheduling.models import GangJob, PhaseTransition
from tests import builders


def test_a_summary_of_250_latencies_has_a_nearest_rank_p99_below_the_maximum():
    seconds = [ms / 1000 for ms in range(1, 251)]  # 1 .. 250 ms
    assert latency_summary(seconds) == {"n": 250, "p50_ms": 125.0, "p99_ms": 248.0, "max_ms": 250.0}


def test_a_summary_of_20_latencies_gives_no_p99_rather_than_the_maximum():
    seconds = [0.010] * 19 + [0.900]
    assert latency_summary(seconds) == {"n": 20, "p50_ms": 10.0, "p99_ms": None, "max_ms": 900.0}


@pytest.mark.parametrize("permille, salt", [(300, AGE_UPDATE_SALT), (100, AGE_DELETE_SALT), (0, 5), (1000, 5)])
def test_the_ageing_hash_picks_exactly_permille_of_any_thousand_consecutive_ids(permille, salt):
    for start in (1, 4_321, 999_001):
        assert sum(picked(i, permille, salt) for i in range(start, start + 1000)) == permille


@pytest.mark.django_db
def test_ageing_updates_the_picked_rows_and_deletes_the_picked_finished_ones_with_their_history(admin_user):
    template, cluster = builders.make_template(), builders.make_cluster()
    queue = builders.make_queue(clusters=[cluster])
    jobs = [builders.make_job(template, queue, cluster, phase=P.SUCCEEDED if i % 2 else P.RUNNING, user=admin_user)
            for i in range(30)]
    now = datetime(2027, 1, 2, 3, 4, 5, tzinfo=UTC)
    to_update = {j.pk for j in jobs if picked(j.pk, 500, AGE_UPDATE_SALT)}
    to_delete = {j.pk for j in jobs if j.phase == P.SUCCEEDED and picked(j.pk, 400, AGE_DELETE_SALT)}
    assert to_update and to_delete  # the case is not empty
    history = PhaseTransition.objects.filter(job_id__in=to_delete).count()

    aged = age_jobs(now, updated_permille=500, deleted_permille=400)

    assert aged == {"updated": len(to_update), "deleted": len(to_delete), "history_deleted": history}
    left = dict(GangJob.objects.values_list("pk", "updated_at"))
    assert set(left) == {j.pk for j in jobs} - to_delete
    assert {pk for pk, at in left.items() if at == now} == to_update - to_delete
    assert not PhaseTransition.objects.filter(job_id__in=to_delete).exists()
    assert PhaseTransition.objects.filter(job_id__in=set(left)).count() > 0
