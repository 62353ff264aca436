"""The dispatcher of a cluster's watches: it passes each dirty job's objects on (`on_change`, one round at a time,
on one thread or several observers), node capacity when it changes (`on_capacity`), and sweeps finished jobs
out of the cache. A mixin of ClusterWatcher (kube/watches.py), which owns the watches and the cache.
"""
from __future__ import annotations

import logging
import queue
import time

from ..observe import capacity, metrics
from ..observe.evidence import JobObjects
from .refs import JOB, NODE, POD, ObjectRef

log = logging.getLogger(__name__)

DEBOUNCE_SECONDS = 0.05

SWEEP_SECONDS = 30  # how often the dispatcher asks `finished_with` which cached jobs to forget

OBSERVER_POLL_SECONDS = 1  # how often an idle observer thread looks at the stop flag

# An observer idle this long releases what its callbacks opened (`on_idle`: its database connection), so the
# observers of a quiet cluster hold none; under churn they are never idle this long.
OBSERVER_IDLE_SECONDS = 30

def _key(ref: ObjectRef) -> str:
    return f"{ref.api_version}/{ref.kind}"


class Dispatcher:
    """Passes a ClusterWatcher's changes on (a mixin: uses its cache, marks, lock and callbacks)."""

    def start_dispatch(self) -> None:
        """Start the dispatcher and, with `observers` > 1, its observer threads (`start` does; tests feed the
        cache with `apply_event` and start only these)."""
        self._start_thread(f"watch-{self.name}-dispatch", self._dispatch)
        for i in range(self.observers if self._work is not None else 0):
            self._start_thread(f"watch-{self.name}-observe-{i}", self._observer)

    def objects_of(self, job_uid: str) -> JobObjects:
        """The job's objects in the cache (new lists of the cached dicts), pods and Jobs by name: the same
        `observe.evidence.JobObjects` a reconcile pass builds from its LIST, whatever carries the job's label."""
        out = JobObjects()
        pod_key, job_key = _key(POD), _key(JOB)
        with self._lock:
            for key, uid in self._by_job.get(job_uid, ()):
                obj = self.cache[key].get(uid)
                if obj is None:
                    continue
                (out.pods if key == pod_key else out.owners if key == job_key else out.gang).append(obj)
        for items in (out.pods, out.owners, out.gang):
            items.sort(key=lambda o: (o.get("kind", ""), (o.get("metadata") or {}).get("name", "")))
        return out

    def _capacity_changed(self) -> None:
        """Pass a changed node capacity on, then have every known job observed again (caller holds no lock)."""
        with self._lock:
            nodes_changed, self._nodes_changed = self._nodes_changed, False
            if nodes_changed:
                nodes = list(self.cache[_key(NODE)].values())
                summary = {**capacity.summarize(nodes), "node_list": capacity.node_list(nodes)}
            else:
                summary = None
        if summary is None or summary == self.capacity:
            return
        try:
            self.on_capacity(summary)
        except Exception:  # keep watching; the next node change tries again
            log.exception("watch %s: recording node capacity failed", self.name)
            return
        self.capacity = summary
        with self._lock:
            for job_uid in self._by_job:
                self._dirty[job_uid] = self._merged_mark(job_uid, False)

    def _dispatch(self) -> None:
        while not self._stop.is_set():
            with self._lock:
                while not self._dirty and not self._nodes_changed and not self._stop.is_set():
                    self._wake.wait(1)
                    if time.monotonic() - self._swept_at > SWEEP_SECONDS:
                        break
            if self._stop.is_set():
                return
            if self.may_write is not None and not self.may_write():
                self._stop.wait(1)  # fenced: keep what is marked until the lease is confirmed or the watch stopped
                continue
            if time.monotonic() - self._swept_at > SWEEP_SECONDS:
                self.sweep()
            time.sleep(DEBOUNCE_SECONDS)  # let a burst (3 pods bound at once) arrive: one observation for all
            if self.on_capacity is not None:
                self._capacity_changed()
            with self._lock:
                batch, self._dirty = self._dirty, {}
            if self._work is None or len(batch) < 2:
                for job_uid, (deleted, marked_at) in batch.items():
                    self._observe(job_uid, deleted, marked_at)
            else:
                for job_uid, (deleted, marked_at) in batch.items():
                    self._work.put((job_uid, deleted, marked_at))
                self._work.join()  # the round ends when every job of it was observed (or skipped: stopping)

    def _observer(self) -> None:
        """An observer thread: observe the jobs the dispatcher queues, one at a time, until stopped; after
        OBSERVER_IDLE_SECONDS without work it calls `on_exit` (what its observations opened is released; the next
        observation opens it again)."""
        busy_at: float | None = None  # when it last observed, None once released
        while True:
            try:
                job_uid, deleted, marked_at = self._work.get(timeout=OBSERVER_POLL_SECONDS)
            except queue.Empty:
                if self._stop.is_set():
                    return
                if busy_at is not None and time.monotonic() - busy_at > OBSERVER_IDLE_SECONDS:
                    busy_at = None
                    self._release()
                continue
            try:
                if not self._stop.is_set():
                    self._observe(job_uid, deleted, marked_at)
                    busy_at = time.monotonic()
            finally:
                self._work.task_done()

    def _release(self) -> None:
        """`on_exit()` in the calling thread, its failure logged (an idle observer's clean-up)."""
        if self.on_exit is None:
            return
        try:
            self.on_exit()
        except Exception:  # the thread goes on either way
            log.exception("watch %s: clean-up of an idle observer failed", self.name)

    def _observe(self, job_uid: str, deleted: bool, marked_at: float) -> None:
        """`on_change` for one job with its cached objects; a failure is logged (the others' observations go on)."""
        try:
            self.on_change(job_uid, self.objects_of(job_uid), deleted)
        except Exception:  # one job's failure must not stop the others' observations
            log.exception("watch %s: observing job %s failed", self.name, job_uid)
            return
        metrics.WATCH_OBSERVATIONS.labels(self.name).inc()
        metrics.WATCH_DELAY.labels(self.name).observe(time.monotonic() - marked_at)
