"""The dispatcher of a cluster's watches: it passes each dirty job's objects on (`on_change`, one round at a time,
on one thread or several observers) once every watched kind is listed (or SYNC_WAIT_SECONDS passed), looks again
at a job whose pass is in flight, passes node capacity on when it changes (`on_capacity`), and sweeps finished
jobs out of the cache. A mixin of ClusterWatcher (reconcile/cluster_watcher.py), which owns the watches and the cache.
"""
from __future__ import annotations

import logging
import queue
import time

from ..kube.refs import JOB, NODE, POD, ObjectRef
from ..observe import capacity, metrics
from ..observe.evidence import JobObjects

log = logging.getLogger(__name__)

DEBOUNCE_SECONDS = 0.05

SWEEP_SECONDS = 30  # how often the dispatcher asks `finished_with` which cached jobs to forget

OBSERVER_POLL_SECONDS = 1  # how often an idle observer thread looks at the stop flag

# An observer idle this long releases what its callbacks opened (`on_idle`: its database connection), so the
# observers of a quiet cluster hold none; under churn they are never idle this long.
OBSERVER_IDLE_SECONDS = 30

# How long the dispatcher holds every observation back, from its start, for a kind whose first LIST is not in (a LIST
# that keeps failing: the API server overloaded, a conversion webhook down). Long enough for a loaded API server to
# answer the first LISTs (seconds), short enough that one broken kind does not stop the watch from recording.
SYNC_WAIT_SECONDS = 30

# An observation that asks to be made again (`on_change` returned True: it saw objects of the job that the job's row
# does not record yet, so it had to leave them out) is made again this soon, at most LOOK_AGAIN_TRIES times in a
# row (about a minute); then only the job's next change (or the resync) observes it.
LOOK_AGAIN_SECONDS = 0.5

LOOK_AGAIN_TRIES = 120

def _key(ref: ObjectRef) -> str:
    return f"{ref.api_version}/{ref.kind}"


class Dispatcher:
    """Passes a ClusterWatcher's changes on (a mixin: uses its cache, marks, lock and callbacks)."""

    def start_dispatch(self) -> None:
        """Start the dispatcher and, with `observers` > 1, its observer threads (`start` does; tests feed the
        cache with `apply_list` and `apply_event` and start only these). Observations wait for every kind's first
        LIST for up to SYNC_WAIT_SECONDS from now."""
        self._sync_deadline = time.monotonic() + SYNC_WAIT_SECONDS
        self._start_thread(f"watch-{self.name}-dispatch", self._dispatch)
        for i in range(self.observers if self._work is not None else 0):
            self._start_thread(f"watch-{self.name}-observe-{i}", self._observer)

    def objects_of(self, job_uid: str) -> JobObjects:
        """The job's objects in the cache (new lists of the cached dicts), pods and Jobs by name: the same
        `observe.evidence.JobObjects` a reconcile pass builds from its LIST, whatever carries the job's label, with
        `unlisted` naming the kinds not listed yet (`unlisted()`)."""
        out = JobObjects(unlisted=self.unlisted())
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
                    if self._mark_due():
                        break
                    self._wake.wait(self._wait_seconds())
                    if time.monotonic() - self._swept_at > SWEEP_SECONDS:
                        break
            if self._stop.is_set():
                return
            if self.may_write is not None and not self.may_write():
                self._stop.wait(1)  # fenced: keep what is marked until the lease is confirmed or the watch stopped
                continue
            if not self._listed_or_waited():
                return
            if time.monotonic() - self._swept_at > SWEEP_SECONDS:
                self.sweep()
            time.sleep(DEBOUNCE_SECONDS)  # let a burst (3 pods bound at once) arrive: one observation for all
            if self.on_capacity is not None:
                self._capacity_changed()
            with self._lock:
                self._mark_due()
                batch, self._dirty = self._dirty, {}
            if self._work is None or len(batch) < 2:
                for job_uid, (deleted, marked_at) in batch.items():
                    self._observe(job_uid, deleted, marked_at)
            else:
                for job_uid, (deleted, marked_at) in batch.items():
                    self._work.put((job_uid, deleted, marked_at))
                self._work.join()  # the round ends when every job of it was observed (or skipped: stopping)

    def _listed_or_waited(self) -> bool:
        """Wait, keeping every mark, until every kind has been listed or SYNC_WAIT_SECONDS passed since the
        dispatcher started (then the kinds still unlisted are logged, once). False when the watcher is stopping."""
        with self._lock:
            while self.unlisted() and not self._stop.is_set():
                left = (self._sync_deadline or 0) - time.monotonic()
                if left <= 0:
                    break
                self._wake.wait(min(left, OBSERVER_POLL_SECONDS))  # `_set_synced` and `stop` wake it
            unlisted = self.unlisted()
            said = self._unlisted_said
            self._unlisted_said = said or bool(unlisted)
        if self._stop.is_set():
            return False
        if unlisted and not said:
            log.warning("watch %s: %s not listed %g s after the watch started; observing without them (the entries "
                        "they could have timed are marked inferred)", self.name, ", ".join(unlisted),
                        SYNC_WAIT_SECONDS)
        return True

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

    def _mark_due(self) -> bool:
        """Mark dirty the jobs whose time to be observed again has come (caller holds the lock). True when any."""
        now, due = time.monotonic(), []
        for job_uid, (at, tries) in self._later.items():
            if at is not None and at <= now:
                due.append(job_uid)
                self._later[job_uid] = (None, tries)
        for job_uid in due:
            self._dirty[job_uid] = self._merged_mark(job_uid, False)
        return bool(due)

    def _wait_seconds(self) -> float:
        """How long the idle dispatcher waits for a mark: 1 s, or less when a job is to be observed again sooner
        (caller holds the lock)."""
        times = [at for at, _ in self._later.values() if at is not None]
        return min([1.0, *(max(at - time.monotonic(), 0.01) for at in times)])

    def _look_again(self, job_uid: str, again: bool) -> None:
        """Note what an observation of the job answered: observe it again after LOOK_AGAIN_SECONDS (`again`, and
        fewer than LOOK_AGAIN_TRIES tries in a row), or not."""
        with self._lock:
            if not again or job_uid not in self._by_job:
                self._later.pop(job_uid, None)
                return
            tries = self._later.get(job_uid, (None, 0))[1] + 1
            at = time.monotonic() + LOOK_AGAIN_SECONDS if tries <= LOOK_AGAIN_TRIES else None
            self._later[job_uid] = (at, tries)
            self._wake.notify()

    def _observe(self, job_uid: str, deleted: bool, marked_at: float) -> None:
        """`on_change` for one job with its cached objects; a failure is logged (the others' observations go on).
        What it answers decides whether the job is observed again without a change (`_look_again`)."""
        try:
            again = self.on_change(job_uid, self.objects_of(job_uid), deleted)
        except Exception:  # one job's failure must not stop the others' observations
            log.exception("watch %s: observing job %s failed", self.name, job_uid)
            self._look_again(job_uid, False)
            return
        self._look_again(job_uid, again is True)
        metrics.WATCH_OBSERVATIONS.labels(self.name).inc()
        metrics.WATCH_DELAY.labels(self.name).observe(time.monotonic() - marked_at)
