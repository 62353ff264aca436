"""List-then-watch of one cluster's gangweb objects, so a change in the cluster reaches a job within a second.

One `ClusterWatcher` per cluster runs one thread per watched kind (pods, batch Jobs, and every gang kind the
backends serve), each doing the informer loop of client-go in miniature:

1. LIST the kind across all namespaces by label selector `gangweb.io/instance=<instance>` and replace the cache
   of that kind with the result (objects that vanished meanwhile count as changed: nothing missed is lost);
2. WATCH from the list's resourceVersion (`allow_watch_bookmarks`, server timeout `WATCH_SECONDS`), applying each
   ADDED / MODIFIED / DELETED to the cache; when the server ends the watch normally, watch again from the last
   resourceVersion seen;
3. when the watch is lost (410 Gone: the resourceVersion is too old; a dropped connection; any API error), count a
   restart (`gangweb_watch_restarts_total{cluster, resource, reason}`) and go back to 1 after a short backoff.

No job is observed before every watched kind has been listed once (`synced`): a job observed from its pods
while its PodGroup's LIST was still out would get its Scheduled time from the pods' binds instead of the PodGroup's
own condition, and a timeline entry is never rewritten. Changes seen meanwhile stay marked (the Nodes' capacity
too) and are passed on once the last kind is listed. A kind whose LIST keeps failing holds the others back for at
most `SYNC_WAIT_SECONDS` after the dispatcher started; then jobs are observed anyway, each observation naming the
kinds not yet listed (`JobObjects.unlisted`: their entries are recorded as inferred, reconcile/derive.py
`unlisted_marked`), and a warning is logged once.

Every change marks the owning job (label `gangweb.io/job-uid`) dirty, and a deletion, a deletionTimestamp newly
set or a spec edit of a gang object or Job (`edited`) marks it for a reconcile pass too; a dispatcher thread
coalesces bursts (`DEBOUNCE_SECONDS`) and calls `on_change(job_uid, JobObjects, deleted)` once per dirty job with
that job's objects from the cache, so observing a job costs no API call. Objects are camelCase dicts (the API's
JSON), kept without `metadata.managedFields` (never read; a large share of every object).

Work per change: a change costs a dict update in the cache and a mark; the marks of one job coalesce into one
observation of that job's own objects (its index `_by_job`, never a scan of the cluster or namespace), however many
of its pods changed meanwhile. The set of dirty jobs is bounded by the jobs in the cache. With `observers` > 1 a
round's dirty jobs are observed by that many threads at once (each job by one thread; the round ends when all are
done, so a job is never observed twice at once and never from an older cache than a write before it): the
observations' database round trips and commits overlap. `gangweb_watch_delay_seconds` observes, per observation,
the time from the job's first mark to the end of its observation (how far behind the cluster the database is);
`gangweb_watch_observations_total` counts them.

With `on_capacity` given, Nodes are watched too (all of them: nodes carry no gangweb label), kept in the cache
reduced to what capacity needs; when what they offer changes (`observe.capacity.summarize`), the dispatcher calls
`on_capacity(summary)` and then marks every job it knows dirty, so pending jobs' why-pending is rebuilt with it.

Memory follows the live jobs, not the cluster's history: objects without a job-UID label are not kept, and with
`finished_with` given the dispatcher asks it every `SWEEP_SECONDS` which of the cached jobs gangweb is done with
(finished and cleaned up, or no job at all) and forgets them: their objects leave the cache, and later events and
LISTs of them are not cached again (`forget`; the last `FORGOTTEN_MAX` such job UIDs are remembered). Finished
pods and Jobs stay in a cluster for inspection, so without this the cache grew with every job ever run.
"""
from __future__ import annotations

import json
import logging
import queue
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable

import urllib3
from kubernetes import client, watch
from kubernetes.client.rest import ApiException

from ..constants import LABEL_INSTANCE, LABEL_JOB_UID
from ..kube.refs import JOB, NODE, POD, ObjectRef
from ..observe import metrics
from ..observe.evidence import JobObjects
from .watch_dispatch import Dispatcher, _key

log = logging.getLogger(__name__)

WATCH_SECONDS = 240  # server-side watch timeout; the watch is then resumed from the last resourceVersion
BACKOFF_SECONDS = (0.2, 0.5, 1, 2, 5, 10)
GONE = 410
FORGOTTEN_MAX = 100_000  # job UIDs remembered as forgotten (~10 MB at most), oldest dropped first


def job_uid_of(obj: dict) -> str | None:
    """The `gangweb.io/job-uid` label of an object, or None."""
    return ((obj.get("metadata") or {}).get("labels") or {}).get(LABEL_JOB_UID)


def edited(previous: dict | None, obj: dict) -> bool:
    """True when `obj` (a gang object or Job as a watch event or LIST has it now) differs from `previous` (as
    cached; None when not cached) in what the reconciler owns: its spec (a hand edit of minCount, minResources, a
    KAI subGroup, a Job's parallelism; `metadata.generation` counts spec changes where the server keeps it, the
    spec itself is compared where it does not) or its deletion (a deletionTimestamp newly set: deleted by hand
    and held by a finalizer, or by the garbage collector after its root). Status-only changes are not edits."""
    if previous is None:
        return False
    was, now = previous.get("metadata") or {}, obj.get("metadata") or {}
    if now.get("deletionTimestamp") and not was.get("deletionTimestamp"):
        return True
    if was.get("generation") is not None and now.get("generation") is not None:
        return was.get("generation") != now.get("generation")
    return previous.get("spec") != obj.get("spec")


def resource_label(ref: ObjectRef) -> str:
    """The metric label of a kind: "pods", "jobs.batch", "podgroups.scheduling.run.ai"."""
    return f"{ref.plural}.{ref.group}" if ref.group else ref.plural


class _Lost(Exception):
    """The watch was lost; `reason` labels the restart metric."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


class _DictWatch(watch.Watch):
    """kubernetes' `watch.Watch` that yields the API server's JSON events as plain dicts.

    Why not `stream(..., deserialize=False)`: in that mode the client reads a watch ERROR event's Status from
    `event["raw_object"]`, which only its deserializing mode sets, so an expired watch (ERROR, code 410) raised
    KeyError and ended the watching thread for good. Parsing here and setting `raw_object` lets the client turn
    ERROR events into `ApiException(status=code)` as designed (`kubernetes/watch/watch.py`, client 36), while
    events stay dicts (no model deserialization).
    """

    def unmarshal_event(self, data: str, return_type):
        event = json.loads(data)
        event["raw_object"] = event.get("object")
        return event


class ClusterWatcher(Dispatcher):
    """Watches one cluster. `start()` returns at once; `stop()` ends every thread within about a second.

    - `name`: the cluster's name (metric label); `api`: a kubernetes ApiClient for it;
    - `kinds`: gang kinds to watch besides pods and batch Jobs (kinds the cluster does not serve are skipped
      after their LIST answers 404);
    - `on_change(job_uid, objects, deleted)`: called from the dispatcher thread; `deleted` is True when one of
      the job's gang objects or Jobs was deleted, started terminating or had its spec edited since the last call
      (`edited`): the reconciler must act (recreate, replace or put back), not wait for the resync;
    - `on_capacity(summary)`: when given, Nodes are watched and it is called from the dispatcher thread with
      `observe.capacity.summarize(nodes)` plus `"node_list": observe.capacity.node_list(nodes)` each time that
      changes (the first time once Nodes are listed);
    - `on_exit()`: when given, called in each of the watcher's threads as it ends (however it ends), and in an
      observer thread idle for OBSERVER_IDLE_SECONDS, to release what the callbacks opened in that thread
      (reconcile.watching closes the thread's database connections);
    - `finished_with(job_uids) -> set of job UIDs`: when given, called from the dispatcher thread every
      `SWEEP_SECONDS` with the job UIDs the cache holds; the jobs it returns are forgotten (`forget`);
    - `may_write() -> bool`: when given and False, the dispatcher calls no callback (the watcher's lease is in
      doubt): changes stay marked and are passed on once it is True again; the watches and cache go on meanwhile;
    - `observers`: threads that call `on_change` for the dirty jobs of a round (1: the dispatcher itself, one job
      after the other). `on_change` must then be safe to call from several threads for different jobs.

    `on_change` returns True when the job must be observed again although nothing changes in the cluster (what it
    saw is only trusted once another writer records it: reconcile.watching `observe_job`); the dispatcher then
    observes it again after LOOK_AGAIN_SECONDS, at most LOOK_AGAIN_TRIES times in a row. Anything else ends that.
    """

    def __init__(self, name: str, api: client.ApiClient, kinds: list[ObjectRef], instance: str,
                 on_change: Callable[[str, JobObjects, bool], bool | None],
                 on_capacity: Callable[[dict], None] | None = None, on_exit: Callable[[], None] | None = None,
                 finished_with: Callable[[list[str]], set[str]] | None = None,
                 may_write: Callable[[], bool] | None = None, observers: int = 1):
        self.name = name
        self.observers = max(1, int(observers))
        # A round's dirty jobs for the observer threads: (job UID, deleted, first marked at); None with one observer.
        self._work: queue.Queue | None = queue.Queue() if self.observers > 1 else None
        self.may_write = may_write
        self.finished_with = finished_with
        self._forgotten: OrderedDict[str, None] = OrderedDict()
        self._swept_at = time.monotonic()
        self.on_exit = on_exit
        self.api = api
        self.kinds = [POD, JOB, *[k for k in kinds if _key(k) not in (_key(POD), _key(JOB), _key(NODE))]]
        if on_capacity is not None:
            self.kinds.append(NODE)
        self.on_capacity = on_capacity
        self.capacity: dict | None = None  # the last summary passed to on_capacity
        self._nodes_changed = False
        self.selector = f"{LABEL_INSTANCE}={instance}"
        self.on_change = on_change
        self.cache: dict[str, dict[str, dict]] = {_key(k): {} for k in self.kinds}
        # job UID -> {(kind key, object UID)}: a job's objects without scanning the whole cache.
        self._by_job: dict[str, set[tuple[str, str]]] = {}
        self.restarts = 0
        # kind key -> set once its first LIST is in (or it is known not to be served); never cleared
        self.synced = {_key(k): threading.Event() for k in self.kinds}
        self._sync_deadline: float | None = None  # time.monotonic() after which unlisted kinds no longer hold back
        self._unlisted_said = False  # the warning that the bound passed with kinds unlisted was logged
        self._lock = threading.Lock()
        # job UID -> (deleted since the last observation, time.monotonic() of its first mark since then)
        self._dirty: dict[str, tuple[bool, float]] = {}
        # job UID -> (time.monotonic() when to observe it again, or None while it is marked or exhausted; tries in a
        # row): the jobs whose last observation asked to be made again (`on_change` returned True)
        self._later: dict[str, tuple[float | None, int]] = {}
        self._wake = threading.Condition(self._lock)
        self._stop = threading.Event()
        self._watches: set[watch.Watch] = set()
        self._threads: list[threading.Thread] = []

    # ---- life cycle --------------------------------------------------------------------------------------------
    def start(self) -> ClusterWatcher:
        """Start one thread per kind, the dispatcher and its observers."""
        for ref in self.kinds:
            self._start_thread(f"watch-{self.name}-{ref.plural}", self._run_kind, ref)
        self.start_dispatch()
        return self

    def _start_thread(self, name: str, target: Callable, *args) -> None:
        t = threading.Thread(target=self._thread, args=(target, *args), name=name, daemon=True)
        t.start()
        self._threads.append(t)

    def _thread(self, target: Callable, *args) -> None:
        """A watcher thread's body: `target(*args)`, then `on_exit()` in the same thread."""
        try:
            target(*args)
        finally:
            if self.on_exit is not None:
                try:
                    self.on_exit()
                except Exception:  # the thread ends either way; say why its clean-up failed
                    log.exception("watch %s: clean-up of thread %s failed", self.name,
                                  threading.current_thread().name)

    def wait_synced(self, timeout: float = 30) -> bool:
        """True once every kind has been listed once (within `timeout` seconds)."""
        deadline = time.monotonic() + timeout
        return all(ev.wait(max(deadline - time.monotonic(), 0)) for ev in self.synced.values())

    def unlisted(self) -> tuple[str, ...]:
        """The watched kinds whose first LIST is not in yet, as metric labels ("podgroups.scheduling.x-k8s.io"), in
        watch order; () once all are."""
        return tuple(resource_label(ref) for ref in self.kinds if not self.synced[_key(ref)].is_set())

    def _set_synced(self, ref: ObjectRef) -> None:
        """Record that `ref` was listed (or is not served) and wake the dispatcher (caller holds the lock)."""
        self.synced[_key(ref)].set()
        self._wake.notify_all()

    def stop(self, timeout: float = 5) -> None:
        """Stop the watches and threads."""
        self._stop.set()
        with self._lock:
            self._wake.notify_all()
            watches = list(self._watches)
        for w in watches:
            w.stop()
        for t in self._threads:
            t.join(timeout)

    def interrupt(self) -> None:
        """Drop every open watch connection as a network failure would (tests use it to prove recovery)."""
        with self._lock:
            watches = list(self._watches)
        for w in watches:
            resp = getattr(w, "_resp", None)
            sock = getattr(getattr(resp, "connection", None), "sock", None)
            if sock is not None:
                try:
                    import socket

                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    # ---- list and watch one kind -------------------------------------------------------------------------------
    def _list_call(self, ref: ObjectRef):
        if ref == POD:
            return client.CoreV1Api(self.api).list_pod_for_all_namespaces, ()
        if ref == JOB:
            return client.BatchV1Api(self.api).list_job_for_all_namespaces, ()
        if ref == NODE:
            return client.CoreV1Api(self.api).list_node, ()
        return client.CustomObjectsApi(self.api).list_cluster_custom_object, (ref.group, ref.version, ref.plural)

    def _run_kind(self, ref: ObjectRef) -> None:
        attempt = 0
        while not self._stop.is_set():
            try:
                rv = self._list(ref)
                attempt = 0
                self._watch(ref, rv)
            except _Lost as lost:
                if self._stop.is_set():
                    return
                self.restarts += 1
                metrics.WATCH_RESTARTS.labels(self.name, resource_label(ref), lost.reason).inc()
                log.info("watch %s %s lost (%s); listing again", self.name, resource_label(ref), lost.reason)
            except ApiException as exc:
                if exc.status == 404 or (exc.status == 403 and ref == NODE):
                    # The cluster does not serve this kind, or (Nodes) gangweb may not read it: nothing to watch;
                    # why-pending then states no capacity facts.
                    log.info("watch %s: %s not served or forbidden (%s); not watched", self.name, _key(ref),
                             exc.status)
                    with self._lock:
                        self._set_synced(ref)
                    return
                self.restarts += 1
                metrics.WATCH_RESTARTS.labels(self.name, resource_label(ref), f"Http{exc.status}").inc()
            except (urllib3.exceptions.HTTPError, OSError, ValueError) as exc:
                if self._stop.is_set():
                    return
                self.restarts += 1
                metrics.WATCH_RESTARTS.labels(self.name, resource_label(ref), type(exc).__name__).inc()
                log.info("watch %s %s: %s", self.name, resource_label(ref), exc)
            self._stop.wait(BACKOFF_SECONDS[min(attempt, len(BACKOFF_SECONDS) - 1)])
            attempt += 1

    def _list(self, ref: ObjectRef) -> str:
        """LIST the kind and `apply_list` its items; returns the list's resourceVersion."""
        fn, args = self._list_call(ref)
        resp = fn(*args, label_selector=self._selector(ref), _preload_content=False, _request_timeout=(5, 60))
        body = json.loads(resp.data)
        self.apply_list(ref, body.get("items") or [])
        return (body.get("metadata") or {}).get("resourceVersion", "")

    def apply_list(self, ref: ObjectRef, items: list[dict]) -> None:
        """Apply a LIST of kind `ref` (its `items`, the API's JSON objects): replace the kind's cache with them, mark
        every job whose objects changed or vanished, and record the kind as listed (`synced`), which lets the
        dispatcher observe once every kind is. Objects of forgotten jobs and gangweb objects without a job-UID label
        are not kept."""
        fresh = {}
        key = _key(ref)
        with self._lock:
            for item in items:
                if ref != NODE and not self._keeps(item):
                    continue
                item.setdefault("apiVersion", ref.api_version)
                item.setdefault("kind", ref.kind)
                item["metadata"].pop("managedFields", None)
                fresh[item["metadata"]["uid"]] = _slim_node(item) if ref == NODE else item
            old = self.cache[key]
            self.cache[key] = fresh
            for uid, obj in old.items():
                self._unindex(key, uid, obj)
            for uid, obj in fresh.items():
                self._index(key, uid, obj)
            for uid, obj in old.items():
                if uid not in fresh:  # deleted while nobody watched
                    self._mark(obj, ref != POD)
            for uid, obj in fresh.items():
                if (old.get(uid) or {}).get("metadata", {}).get("resourceVersion") != obj["metadata"].get(
                        "resourceVersion"):
                    self._mark(obj, ref not in (POD, NODE) and edited(old.get(uid), obj))
            if ref == NODE:
                self._nodes_changed = True
                self._wake.notify()
            self._set_synced(ref)

    def _watch(self, ref: ObjectRef, rv: str) -> None:
        """Watch from `rv` until stopped; resumes after normal server timeouts. Raises _Lost when lost."""
        fn, args = self._list_call(ref)
        while not self._stop.is_set():
            w = _DictWatch()
            with self._lock:
                self._watches.add(w)
            try:
                for event in w.stream(fn, *args, label_selector=self._selector(ref), resource_version=rv,
                                      allow_watch_bookmarks=True, timeout_seconds=WATCH_SECONDS,
                                      _request_timeout=(5, WATCH_SECONDS + 30)):
                    etype, obj = event.get("type"), event.get("object") or {}
                    rv = (obj.get("metadata") or {}).get("resourceVersion") or rv
                    if etype == "BOOKMARK":
                        continue
                    metrics.WATCH_EVENTS.labels(self.name, resource_label(ref), etype or "").inc()
                    self.apply_event(ref, etype, obj)
            except ApiException as exc:
                if self._stop.is_set():
                    return
                raise _Lost("Gone" if exc.status == GONE else f"Http{exc.status}") from exc
            except (urllib3.exceptions.HTTPError, OSError, ValueError) as exc:
                if self._stop.is_set():
                    return
                raise _Lost(type(exc).__name__) from exc
            finally:
                with self._lock:
                    self._watches.discard(w)

    def apply_event(self, ref: ObjectRef, etype: str, obj: dict) -> None:
        """Apply one watch event (ADDED / MODIFIED / DELETED) of kind `ref` to the cache and mark its job dirty.
        Objects without a UID, gangweb objects without a job-UID label and objects of forgotten jobs are not kept."""
        key = _key(ref)
        uid = (obj.get("metadata") or {}).get("uid")
        if not uid:
            return
        obj.setdefault("apiVersion", ref.api_version)
        obj.setdefault("kind", ref.kind)
        obj["metadata"].pop("managedFields", None)
        if ref == NODE:
            obj = _slim_node(obj)
        with self._lock:
            previous = self.cache[key].pop(uid, None)
            if previous is not None:
                self._unindex(key, uid, previous)
            if ref != NODE and not self._keeps(obj):
                return
            if etype != "DELETED":
                self.cache[key][uid] = obj
                self._index(key, uid, obj)
            self._mark(obj, ref not in (POD, NODE) and (etype == "DELETED" or edited(previous, obj)))
            if ref == NODE and (etype == "DELETED" or _node_facts(previous) != _node_facts(obj)):
                # Kubelet heartbeats modify every node every few seconds; only a change of what capacity reads
                # wakes the dispatcher.
                self._nodes_changed = True
                self._wake.notify()

    def _keeps(self, obj: dict) -> bool:
        """Whether a gangweb object belongs in the cache: it names a job that is not forgotten (caller holds the
        lock)."""
        job = job_uid_of(obj)
        return bool(job) and job not in self._forgotten

    # ---- memory: forget the jobs gangweb is done with ----------------------------------------------------------
    def forget(self, job_uids: Iterable[str]) -> int:
        """Drop the cached objects of these jobs and keep their later events out of the cache. Returns how many
        objects left the cache."""
        dropped = 0
        with self._lock:
            for job in job_uids:
                for key, uid in self._by_job.pop(job, ()):
                    dropped += self.cache[key].pop(uid, None) is not None
                self._dirty.pop(job, None)
                self._later.pop(job, None)
                self._forgotten[job] = None
                self._forgotten.move_to_end(job)
            while len(self._forgotten) > FORGOTTEN_MAX:
                self._forgotten.popitem(last=False)
        return dropped

    def sweep(self) -> int:
        """Ask `finished_with` about every job the cache holds and forget those it names. Returns the objects
        dropped; 0 without `finished_with` or when it fails (logged: the next sweep asks again)."""
        self._swept_at = time.monotonic()
        if self.finished_with is None:
            return 0
        with self._lock:
            jobs = list(self._by_job)
        if not jobs:
            return 0
        try:
            done = self.finished_with(jobs)
        except Exception:  # e.g. the database is restarting: keep everything until the next sweep
            log.exception("watch %s: asking which jobs are finished failed", self.name)
            return 0
        return self.forget(done) if done else 0

    def cached_objects(self) -> int:
        """How many gangweb objects (not Nodes) the cache holds."""
        with self._lock:
            return sum(len(objs) for key, objs in self.cache.items() if key != _key(NODE))

    def _selector(self, ref: ObjectRef) -> str | None:
        """Nodes are not gangweb's: all of them count. Everything else by the instance label."""
        return None if ref == NODE else self.selector

    # ---- dispatch ----------------------------------------------------------------------------------------------
    def _mark(self, obj: dict, deleted: bool) -> None:
        """Mark the object's job dirty (caller holds the lock)."""
        uid = job_uid_of(obj)
        if uid:
            self._dirty[uid] = self._merged_mark(uid, deleted)
            self._wake.notify()

    def _merged_mark(self, job_uid: str, deleted: bool) -> tuple[bool, float]:
        """The job's dirty mark with `deleted` added; its first-marked time kept (caller holds the lock)."""
        was = self._dirty.get(job_uid)
        return (was is not None and was[0]) or deleted, was[1] if was is not None else time.monotonic()

    def _index(self, key: str, uid: str, obj: dict) -> None:
        job = job_uid_of(obj)
        if job:
            self._by_job.setdefault(job, set()).add((key, uid))

    def _unindex(self, key: str, uid: str, obj: dict) -> None:
        job = job_uid_of(obj)
        refs = self._by_job.get(job) if job else None
        if refs is not None:
            refs.discard((key, uid))
            if not refs:
                del self._by_job[job]


def _slim_node(node: dict) -> dict:
    """A Node reduced to what capacity reads (a node's status also lists its images: kilobytes each)."""
    meta, status = node.get("metadata") or {}, node.get("status") or {}
    return {"apiVersion": node.get("apiVersion"), "kind": node.get("kind"),
            "metadata": {k: meta[k] for k in ("name", "uid", "resourceVersion", "labels") if k in meta},
            "spec": {"unschedulable": True} if (node.get("spec") or {}).get("unschedulable") else {},
            "status": {"allocatable": status.get("allocatable") or {},
                       "conditions": [{"type": "Ready", "status": c.get("status")}
                                      for c in status.get("conditions") or [] if c.get("type") == "Ready"]}}


def _node_facts(node: dict | None) -> tuple | None:
    """What capacity reads of a slimmed node (its resourceVersion and heartbeats aside)."""
    if node is None:
        return None
    return node.get("spec"), node.get("status"), (node.get("metadata") or {}).get("labels")
