"""Client-side rate limit of the requests to one cluster's API server: a token bucket per cluster and process.

Semantics are client-go's `rest.Config` QPS/Burst (`flowcontrol.NewTokenBucketRateLimiter`, golang.org/x/time/rate):
the bucket holds at most `burst` tokens, refills at `qps` tokens per second, and every request takes one, waiting
for it when the bucket is empty. The kubernetes Python client has no such limit; pyrate-limiter's token bucket
(GCRA state, thread-safe) does the counting. Scope: one bucket per cluster in each process (like one client-go
client per controller process), shared by all the threads and every rebuilt ApiClient of that cluster in the
process; a cluster's total is at most `qps` times the processes that talk to it (the workers consuming its shard,
its watcher, the web's reads).

Why the defaults (settings.GANGWEB_CLUSTER_QPS = 50, GANGWEB_CLUSTER_BURST = 100) are above client-go's 5/10:
gangweb was unlimited until now, and its measured peak is a bulk batch reconciled from 4 threads per process
(bench/README.md: 4.6-4.7 jobs/s, 4 creates per k8s-workload job plus one LIST per kind per batch, ~20-25 requests
per second from one worker); 5 QPS would cut that to about 1 job/s. 50/100 (kube-scheduler's own defaults) leaves
the measured peak unthrottled and still bounds a runaway loop against one API server. A slow API server is not
what this protects against (its requests time out, `client.REQUEST_TIMEOUT`); the shard queues are
(scheduling/work/routing.py).

Cost: ~28 us of CPU per request when a token is there (measured on this machine, against 1-3 ms of the client's own
work per request). A request that cannot get a token within MAX_WAIT seconds raises TransientKubeError
ClientThrottled (retried with the task's backoff), so a very low limit never holds a worker slot past a request's own
read timeout.

`waited()` says how long this process's requests have waited for tokens so far (seconds, and how many waited), so
a worker can log whether the limit held a batch back (reconcile/jobs/batch.py) and the bench can say whether the
limit is the ceiling (bench/README.md).
"""
from __future__ import annotations

import threading
import time
from dataclasses import dataclass

from django.conf import settings
from pyrate_limiter import Limiter, Rate
from pyrate_limiter.abstracts.algorithm import TokenBucket
from pyrate_limiter.buckets.state_bucket import StateBucket

from .errors import TransientKubeError

CLIENT_THROTTLED = "ClientThrottled"
MIN_QPS = 0.1  # the lowest rate a cluster may be limited to (the model's validator says the same)
MAX_WAIT = 30.0  # seconds a request waits for a token at most: the read timeout of one request (client.py)
# Rate(limit, interval_ms): `qps` as a count per 1,000 s keeps fractional QPS (0.5) exact to 1/1000 request/s.
_INTERVAL_MS = 1_000_000

_lock = threading.Lock()
_buckets: dict[int, Bucket] = {}
_wait_lock = threading.Lock()
_waited = {"seconds": 0.0, "takes": 0}  # this process's totals over every bucket (`waited`)


@dataclass(frozen=True)
class Limits:
    """A cluster's client rate limit: `qps` requests per second sustained (> 0), `burst` at once (>= 1)."""

    qps: float
    burst: int


def limits_for(cluster) -> Limits:
    """`cluster`'s own `api_qps`/`api_burst` where set, else the install's GANGWEB_CLUSTER_QPS/BURST. A burst below
    one and a QPS below MIN_QPS is MIN_QPS (a bad setting never means "no requests at all")."""
    qps = getattr(cluster, "api_qps", None) or settings.GANGWEB_CLUSTER_QPS
    burst = getattr(cluster, "api_burst", None) or settings.GANGWEB_CLUSTER_BURST
    return Limits(qps=max(MIN_QPS, float(qps)), burst=max(1, int(burst)))


class Bucket:
    """One cluster's token bucket (thread-safe). `take()` waits for a token; see the module docstring."""

    def __init__(self, limits: Limits):
        self.limits = limits
        rate = Rate(max(1, round(limits.qps * _INTERVAL_MS / 1000)), _INTERVAL_MS, burst=limits.burst)
        self._limiter = Limiter(StateBucket([rate], algorithm=TokenBucket()), buffer_ms=0)

    def take(self, name: str, max_wait: float | None = None) -> None:
        """Take one token, waiting up to `max_wait` seconds (default MAX_WAIT) for it. Raises TransientKubeError
        ClientThrottled (naming the cluster `name` and its limits) when none came in time."""
        max_wait = MAX_WAIT if max_wait is None else max_wait
        # Polled without blocking (pyrate-limiter's own blocking wait gave up early under 8 threads: 7 of 414
        # takes failed a 5-s wait at 50 QPS, where a token comes every 20 ms); a wait sleeps one token's time.
        if self._limiter.try_acquire("requests", blocking=False):
            return
        started = time.monotonic()
        deadline = started + max_wait
        step = min(1.0, 1.0 / self.limits.qps)
        try:
            while not self._limiter.try_acquire("requests", blocking=False):
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                time.sleep(min(step, left))
            else:
                return
        finally:
            _note_wait(time.monotonic() - started)
        raise TransientKubeError(CLIENT_THROTTLED, f"cluster {name}: no request slot within {max_wait:g} s "
                                                   f"(client limit {self.limits.qps:g} QPS, burst "
                                                   f"{self.limits.burst})")


def bucket_for(cluster) -> Bucket:
    """This process's bucket of `cluster` (by primary key), rebuilt (full) when its limits changed."""
    limits = limits_for(cluster)
    with _lock:
        bucket = _buckets.get(cluster.pk)
        if bucket is None or bucket.limits != limits:
            bucket = _buckets[cluster.pk] = Bucket(limits)
        return bucket


def limit(api, cluster) -> None:
    """Make every request of ApiClient `api` take a token of `cluster`'s bucket first (its REST client's
    `request`, which every call, LIST, watch and create goes through)."""
    rest = api.rest_client
    unthrottled = rest.request
    bucket = bucket_for(cluster)
    name = cluster.name

    def request(*args, **kwargs):
        bucket.take(name)
        return unthrottled(*args, **kwargs)

    rest.request = request


def _note_wait(seconds: float) -> None:
    with _wait_lock:
        _waited["seconds"] += seconds
        _waited["takes"] += 1


def waited() -> tuple[float, int]:
    """(seconds, takes): how long requests of this process have waited for a token so far, over every cluster's
    bucket, and how many takes had to wait at all. Running totals: a caller takes the difference over its work."""
    with _wait_lock:
        return _waited["seconds"], _waited["takes"]


def forget(cluster_pk: int | None = None) -> None:
    """Drop buckets (of one cluster, or all): tests."""
    with _lock:
        for key in [k for k in _buckets if cluster_pk is None or k == cluster_pk]:
            del _buckets[key]
