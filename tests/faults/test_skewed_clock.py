"""A worker whose clock runs 200 s ahead never takes a live resync lease, never holds one longer, and writes no time
in the future where the database's clock can be used (issue 31, part 3).

The fault pass found a worker 200 s ahead taking the resync lease while another held it (`leases.acquire` compared
the holder's `expires_at` with the acquirer's clock): two resyncs of one cluster ran at once for ~14 s, and 179 of
200 job rows got `updated_at` in the future. Here the skewed worker is a real process run under libfaketime
(`FAKETIME=+200s`, Debian's faketime package) against the same PostgreSQL database as the test.

PostgreSQL only: SQLite runs in each process, on each process's clock, so there is no one clock to agree on. CI
runs on PostgreSQL and sets GANGWEB_TEST_REQUIRE_POSTGRESQL=1, which turns the skip into a failure.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import datetime
from pathlib import Path

import pytest
from django.db import connection

from scheduling.models import GangJob, Lease, leases
from scheduling.reconcile import resync
from scheduling.reconcile.jobs import claims
from tests import builders

ON_POSTGRESQL = os.environ.get("DATABASE_URL", "").startswith(("postgres://", "postgresql://"))
if not ON_POSTGRESQL and os.environ.get("GANGWEB_TEST_REQUIRE_POSTGRESQL") == "1":
    raise RuntimeError("GANGWEB_TEST_REQUIRE_POSTGRESQL=1 but DATABASE_URL is not a PostgreSQL URL: "
                       "tests/faults/test_skewed_clock.py would not run")
LIBFAKETIME = Path("/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1")
AHEAD = 200  # seconds the skewed worker's clock runs ahead

pytestmark = [pytest.mark.faults, pytest.mark.django_db(transaction=True),
              pytest.mark.skipif(not ON_POSTGRESQL, reason="one database clock needs PostgreSQL "
                                                           "(DATABASE_URL=postgres://)")]


def skewed(code: str, **values) -> dict:
    """Run `code` in a Django process whose clock runs AHEAD seconds ahead, on this test's database; `values` are
    its globals; it leaves its answer in `out` (a dict, returned)."""
    if not LIBFAKETIME.exists():
        pytest.fail(f"{LIBFAKETIME} is missing (apt-get install faketime)", pytrace=False)
    db = connection.settings_dict
    url = f"postgres://{db['USER']}:{db['PASSWORD']}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{db['NAME']}"
    program = ("import json, sys, time, django\ndjango.setup()\n"
               f"globals().update(json.loads(sys.argv[1]))\nout = {{}}\n{code}\n"
               "out['host_time'] = time.time()\nprint(json.dumps(out, default=str))\n")
    env = {**os.environ, "DATABASE_URL": url, "DJANGO_SETTINGS_MODULE": "gangweb.settings", "GANGWEB_TESTING": "1",
           "LD_PRELOAD": str(LIBFAKETIME), "FAKETIME": f"+{AHEAD}s", "FAKETIME_DONT_FAKE_MONOTONIC": "1"}
    done = subprocess.run([sys.executable, "-c", program, json.dumps(values)], env=env, capture_output=True,
                          text=True, timeout=120, cwd=Path(__file__).resolve().parents[2])
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def db_now() -> datetime:
    with connection.cursor() as cursor:
        cursor.execute("SELECT clock_timestamp()")
        return cursor.fetchone()[0]


def test_a_worker_200_s_ahead_runs_no_second_resync_and_writes_no_future_time(admin_user):
    import time

    cluster = builders.make_cluster("skewed")
    queue = builders.make_queue("team-a", clusters=[cluster])
    job = builders.make_job(builders.make_template("llm"), queue, cluster, user=admin_user)
    name = resync.lease_name(cluster)

    # A resync holds the cluster's lease (this process: the right clock). The skewed worker's resync finds it held:
    # one resync at a time (before: its clock put the lease 140 s past its expiry, and it ran a second one).
    holder = leases.acquire(name, resync.LEASE_SECONDS)
    assert holder
    out = skewed("from scheduling.models import Cluster\nfrom scheduling.reconcile import resync\n"
                 "out['resync'] = resync.resync_cluster(Cluster.objects.get(pk=cluster_id))\n"
                 "from scheduling.models import leases\nout['acquire'] = leases.acquire(name, 60)",
                 cluster_id=cluster.pk, name=name)
    assert out["host_time"] - time.time() > AHEAD - 30  # the worker's clock did run ahead
    assert out["resync"] == {"skipped": 1} and out["acquire"] is None
    assert Lease.objects.get(name=name).holder == holder

    # The skewed worker holds it: its expiry is the database's now + 60 s, not its own clock's (before: 260 s, so a
    # killed skewed holder blocked every other resync of the cluster for over 4 minutes).
    assert leases.release(name, holder)
    out = skewed("from scheduling.models import leases\nout['token'] = leases.acquire(name, 60)", name=name)
    assert out["token"]
    lease = Lease.objects.get(name=name)
    assert lease.holder == out["token"]
    assert 50 <= (lease.expires_at - db_now()).total_seconds() <= 61
    assert leases.acquire(name, 60) is None  # this side does not take the skewed worker's live lease either

    # What the skewed worker writes on a job: its claim ends CLAIM_SECONDS after the database's now, and the row's
    # updated_at is not in the future (before: 179 of 200 rows were).
    out = skewed("from scheduling.models import GangJob\nfrom scheduling.reconcile import status\n"
                 "from scheduling.reconcile.jobs import claims\n"
                 "out['claimed'] = claims.claim([job_id], 'skewed-task')\n"
                 "status.record_error(GangJob.objects.get(pk=job_id), 'ClusterUnreachable', 'not attempted')",
                 job_id=job.pk)
    assert out["claimed"] == [job.pk]
    row = GangJob.objects.get(pk=job.pk)
    now = db_now()
    assert row.phase_reason == "ClusterUnreachable"
    assert row.updated_at <= now
    assert (now - row.updated_at).total_seconds() < 60
    assert 0 < (row.claimed_until - now).total_seconds() <= claims.CLAIM_SECONDS
    assert list(resync.jobs_to_resync(cluster, grace_seconds=60)) == []  # the skewed worker's live claim holds
    print(f"\n[faults] worker {AHEAD} s ahead: its resync skipped while another held the lease; its lease expires "
          f"{(lease.expires_at - db_now()).total_seconds():.0f} s after the database's now; job updated_at "
          f"{(now - row.updated_at).total_seconds():.1f} s in the past")
