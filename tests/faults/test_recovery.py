"""Recovery within one resync (issue 31, parts 1 and 2): after the API server comes back, or a worker is killed with
its whole process group mid-batch, every job of a 100-job bulk is dispatched within a resync period plus one pass
(the claim's lease too, for the killed worker), not after two more resyncs or the broker's 20-minute redelivery.

Each run submits one bulk of BULK short jobs (two reconcile batches of 50), breaks something as soon as the first
job is dispatched, and measures from the moment the fault ends (the API server answers again; the worker is killed
and a new one started) until every job has left Submitted, counted through the API; then lets the run settle and
counts the cluster's objects (`bench.faultstack.census`: no job lost, none duplicated, nothing left behind). The
stack's resync runs every 5 s (tests/faults/conftest.py), so "a period plus a pass" is a few seconds plus one
resync of the cluster; the figures are printed (pytest -s) for docs/operations.md.
"""
from __future__ import annotations

import time

import pytest

from bench.faultstack import settle
from bench.stack import wait_for
from scheduling.reconcile.jobs import claims

from .test_faults import SETTLE_SECONDS, phases_of, report, settled

pytestmark = [pytest.mark.faults]

BULK = 100
RESYNC_SECONDS = 5  # the stack's (tests/faults/conftest.py)


def waiting(client, namespace) -> int:
    """Jobs of the run still Submitted (never dispatched)."""
    return sum(p == "Submitted" for p in phases_of(client, namespace).values())


def bulk_mid_dispatch(client, namespace) -> list[int]:
    """Submit BULK short jobs in one request; return once the first of them left Submitted (mid-batch)."""
    jobs = client.bulk([f"job-{i}" for i in range(BULK)], namespace, "fault-short")
    wait_for(lambda: waiting(client, namespace) < BULK, 120, "a first dispatch", interval=0.5)
    return [j["id"] for j in jobs]


def until_dispatched(client, namespace, timeout: float) -> float:
    """Seconds until every job of the run left Submitted (polled every second; fails after `timeout`)."""
    start = time.monotonic()
    wait_for(lambda: waiting(client, namespace) == 0, timeout, "every job dispatched", interval=1)
    return time.monotonic() - start


def finish(stack, client, kube, namespace, ids, what: str, started: float) -> None:
    census = settle(client, kube, namespace, SETTLE_SECONDS, settled)
    report(what, census, started, client)
    assert census.problems == []
    assert census.phases == {"Succeeded": BULK}
    assert sorted(j["id"] for j in client.jobs(namespace)) == sorted(ids)


def test_after_a_kube_apiserver_kill_mid_bulk_every_job_is_dispatched_within_a_resync_and_a_pass(
        stack, client, kube, namespace):
    started = time.monotonic()
    ids = bulk_mid_dispatch(client, namespace)
    stack.kill_apiserver()
    # The batches meet a refused connection and give up on the rest ("not attempted", recorded on each job).
    wait_for(lambda: any(j["phase_reason"] for j in client.jobs(namespace)), 120, "a job given up on", interval=0.5)
    left = waiting(client, namespace)
    stack.start_apiserver_again()
    took = until_dispatched(client, namespace, 300)
    print(f"\n[faults] kube-apiserver kill -9 mid-bulk of {BULK}: {left} left undispatched; every job dispatched "
          f"{took:.0f} s after the restart (resync every {RESYNC_SECONDS} s)")
    finish(stack, client, kube, namespace, ids, f"kube-apiserver kill -9 mid-bulk ({took:.0f} s to dispatch)",
           started)


def test_after_a_60_s_kube_apiserver_stop_mid_bulk_every_job_is_dispatched_within_a_resync_and_a_pass(
        stack, client, kube, namespace):
    started = time.monotonic()
    ids = bulk_mid_dispatch(client, namespace)
    stack.pause_apiserver(60)  # SIGSTOP 60 s: requests hang, then time out
    left = waiting(client, namespace)
    took = until_dispatched(client, namespace, 300)
    print(f"\n[faults] kube-apiserver SIGSTOP 60 s mid-bulk of {BULK}: {left} undispatched at SIGCONT; every job "
          f"dispatched {took:.0f} s after it (resync every {RESYNC_SECONDS} s)")
    finish(stack, client, kube, namespace, ids, f"kube-apiserver SIGSTOP 60 s mid-bulk ({took:.0f} s to dispatch)",
           started)


def test_a_worker_killed_with_its_process_group_mid_batch_has_its_jobs_taken_up_once_its_claims_lapse(
        stack, client, kube, namespace):
    started = time.monotonic()
    ids = bulk_mid_dispatch(client, namespace)
    stack.kill("worker")  # kill -9 of the worker's process group: no ack, no release; Redis gives it back in 20 min
    stack.start_worker(2, loglevel="INFO")
    left = waiting(client, namespace)
    took = until_dispatched(client, namespace, 300)
    print(f"\n[faults] worker kill -9 (process group) mid-batch of {BULK}: {left} undispatched at the kill; every "
          f"job dispatched {took:.0f} s after it (claims lapse after {claims.CLAIM_SECONDS} s, resync every "
          f"{RESYNC_SECONDS} s)")
    finish(stack, client, kube, namespace, ids, f"worker kill -9 mid-batch ({took:.0f} s to dispatch)", started)
