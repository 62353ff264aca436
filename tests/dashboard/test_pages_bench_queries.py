"""The query counts bench/pages.py asserts at 1,000,000 jobs (issue 23), pinned on a small seed: every page and API
list it measures (deep keyset pages, filters, name search, each sort) runs exactly `pages.QUERIES[label]` SQL
statements, the figure the bench requires at both of its sizes. A page that gains a query fails here first, with
no timing. PostgreSQL only, like the bench's seed (gen_random_uuid, make_interval); not in a test transaction
because the seed ends with VACUUM ANALYZE."""
from __future__ import annotations

import os

import pytest

from bench import pages
from bench.common import bench_fixtures

ON_POSTGRESQL = os.environ.get("DATABASE_URL", "").startswith(("postgres://", "postgresql://"))
pytestmark = [pytest.mark.django_db(transaction=True),
              pytest.mark.skipif(not ON_POSTGRESQL, reason="the bench seed is PostgreSQL SQL (DATABASE_URL=postgres://)")]


def test_every_page_the_bench_measures_runs_the_pinned_number_of_queries(client):
    user, version, _queue, cluster = bench_fixtures()
    client.force_login(user)
    job_id, parent, queue, name, _ = pages._seed(400, 12, "pgs", user, version, cluster, 20, rebuild=True)
    counts = {label: pages.measure(client, path, 1)["queries"]
              for label, path in pages._pages(job_id, parent, queue, name, 400)}
    assert counts == pages.QUERIES
