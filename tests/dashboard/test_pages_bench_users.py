"""bench/pages.py's per-user measurement (issue 36) on a small seed: the team viewer is a plain user who sees only
its department's jobs, every page answers both users (the bench raises on anything but 200), and the team viewer's
deep page is a page of its own list. PostgreSQL only, like the bench's seed; not in a test transaction because the
seed ends with VACUUM ANALYZE."""
from __future__ import annotations

import os

import pytest

from bench import pages
from bench.common import TEAM_VIEWER, bench_fixtures

ON_POSTGRESQL = os.environ.get("DATABASE_URL", "").startswith(("postgres://", "postgresql://"))
pytestmark = [pytest.mark.django_db(transaction=True),
              pytest.mark.skipif(not ON_POSTGRESQL, reason="the bench seed is PostgreSQL SQL (DATABASE_URL=postgres://)")]


def test_the_team_viewer_is_measured_on_its_own_department_beside_the_superuser():
    from django.contrib.auth import get_user_model

    from scheduling.models import GangJob

    user, version, _queue, cluster = bench_fixtures()
    _job, parent, _leaf, _name, _ = pages._seed(400, 60, "pgs", user, version, cluster, 20, rebuild=True)  # 3 depts
    result = pages.per_user(user, version, parent, repeat=1, rounds=3)

    viewer = get_user_model().objects.get(username=TEAM_VIEWER)
    assert (viewer.is_staff, viewer.is_superuser) == (False, False)
    visible = GangJob.objects.filter(queue__parent__name=parent).count()
    assert 0 < result["team_viewer_jobs"] == visible < GangJob.objects.count()
    assert GangJob.objects.get(id=result["job_id"]).queue.parent.name == parent
    assert set(result["pages"]) == set(pages.USER_PAGES)
    for figs in result["pages"].values():
        assert set(figs) == {"superuser", "team viewer"}
        assert all(f["samples"] == 3 for f in figs.values())
    deep = result["pages"]["API jobs list, deep page"]
    assert deep["superuser"]["path"] != deep["team viewer"]["path"]
    # The team member's access check reads its grants and the queue tree: more statements than the superuser's.
    api_list = result["pages"]["API jobs list"]
    assert api_list["team viewer"]["queries"] > api_list["superuser"]["queries"]
