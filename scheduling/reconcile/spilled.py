"""A resync's snapshot of a cluster kept in a temporary SQLite file, so its memory does not grow with the cluster.

The periodic resync lists every gangweb object of a cluster (observed.py `snapshot`: one LIST per kind, by the
instance label) and then runs one pass per job over its slice. Held in memory, that snapshot is every object of the
cluster at once (220 MiB at 10,000 one-pod jobs, bench/README.md), and Python's garbage collector walks all of it
again and again while the passes run. Here each LIST is read page by page (kube/objects.py `list_pages`), each page's
objects (pods and Services already projected, observed.py `projection`) are written to a table keyed by job UID and
namespace, and a job's pass reads back only its own rows (`take`): memory holds one page and one job's objects.

The file lives in the system's temporary directory (`tempfile`, TMPDIR), is private to this process, and is removed
by `close()` (a `with` block). It holds no secret that the API server's answer did not (objects as listed, minus
managedFields and, for pods and Services, their specs); a crashed worker leaves it behind under a
`gangweb-resync-*` directory.
"""
from __future__ import annotations

import json
import sqlite3
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from ..backends import registry
from ..constants import LABEL_INSTANCE, LABEL_JOB_UID
from ..kube import objects
from ..kube.errors import STORED_VERSION_UNREADABLE, TransientKubeError
from ..kube.objects import JOB, POD, SERVICE
from ..kube.refs import ObjectRef
from .desired import instance_label
from .observed import Observed, Snapshot, kind_key, projection

UID_CHUNK = 500  # job UIDs per `uids()` chunk (a database `IN (...)` of that many)


class SpilledSnapshot:
    """Every gangweb object of one instance in a cluster, filed by job UID and namespace in a temporary SQLite file.

    Same contract as observed.Snapshot where a resync uses it: `listed_at` (time.time() when the first LIST started),
    `unreadable` (kind_key -> StoredVersionUnreadable error of its LIST), `limit_defaults` (namespace -> LimitRange
    defaults, shared by the passes), `pod_policies` (likewise per template version), `take(job, backend)` ->
    Observed. Objects without the job-UID label are not kept (as in Snapshot.add). Use as a context manager, or
    call `close()`."""

    def __init__(self):
        self.listed_at = time.time()
        self.unreadable: dict = {}
        self.limit_defaults: dict = {}
        self.pod_policies: dict = {}  # template version id -> pod policy (observed.Snapshot.pod_policies)
        self._refs: dict[str, ObjectRef] = {}
        self._dir = tempfile.TemporaryDirectory(prefix="gangweb-resync-")
        self._db = sqlite3.connect(str(Path(self._dir.name) / "snapshot.sqlite3"), isolation_level=None)
        # A scratch file of this process: no journal, no fsync; a small page cache (2 MiB) bounds its memory.
        for pragma in ("journal_mode = OFF", "synchronous = OFF", "cache_size = -2048", "temp_store = FILE"):
            self._db.execute(f"PRAGMA {pragma}")
        self._db.execute("CREATE TABLE objects (seq INTEGER PRIMARY KEY, uid TEXT NOT NULL, namespace TEXT NOT NULL, "
                         "kind TEXT NOT NULL, body TEXT NOT NULL)")
        self._indexed = False

    def __enter__(self) -> SpilledSnapshot:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        """Remove the file (idempotent)."""
        if self._db is not None:
            self._db.close()
            self._db = None
            self._dir.cleanup()

    def add(self, items: list[dict], ref: ObjectRef) -> None:
        """File LISTed objects of kind `ref` (one page) under their job UID and namespace, in list order."""
        key = kind_key(ref)
        self._refs[key] = ref
        rows = []
        for item in items:
            meta = item.get("metadata") or {}
            uid = (meta.get("labels") or {}).get(LABEL_JOB_UID)
            if uid:
                rows.append((str(uid), meta.get("namespace") or "", key, json.dumps(item, separators=(",", ":"))))
        if rows:
            with self._db:
                self._db.executemany("INSERT INTO objects (uid, namespace, kind, body) VALUES (?, ?, ?, ?)", rows)

    def drop(self, ref: ObjectRef) -> None:
        """Forget every object of kind `ref` (its LIST starts again)."""
        with self._db:
            self._db.execute("DELETE FROM objects WHERE kind = ?", (kind_key(ref),))

    def _index(self) -> None:
        if not self._indexed:
            self._db.execute("CREATE INDEX objects_job ON objects (uid, namespace, seq)")
            self._indexed = True

    def uids(self, size: int = UID_CHUNK) -> Iterator[list[str]]:
        """The job UIDs that have objects here, `size` at a time, in ascending order."""
        self._index()
        after = None
        while True:
            if after is None:
                rows = self._db.execute("SELECT DISTINCT uid FROM objects ORDER BY uid LIMIT ?", (size,)).fetchall()
            else:
                rows = self._db.execute("SELECT DISTINCT uid FROM objects WHERE uid > ? ORDER BY uid LIMIT ?",
                                        (after, size)).fetchall()
            if not rows:
                return
            chunk = [r[0] for r in rows]
            yield chunk
            after = chunk[-1]

    def slice(self, uid: str) -> dict[str, Observed]:
        """Everything labelled with job UID `uid`, by namespace ({namespace: Observed}; ownership not yet judged),
        read back from the file; {} when there is none (observed.Snapshot.slice)."""
        self._index()
        one = Snapshot(listed_at=self.listed_at, unreadable=self.unreadable, limit_defaults=self.limit_defaults,
                       pod_policies=self.pod_policies)
        for key, body in self._db.execute("SELECT kind, body FROM objects WHERE uid = ? ORDER BY seq", (str(uid),)):
            one.add([json.loads(body)], self._refs[key])
        return one.slice(uid)

    def for_job(self, job, backend) -> Observed:
        """The job's own objects as observed.Snapshot.for_job gives them (its uid, namespace and recorded
        `owner_uids`; `ownership.trust`), read back from the file in list order."""
        self._index()
        one = Snapshot(listed_at=self.listed_at, unreadable=self.unreadable, limit_defaults=self.limit_defaults,
                       pod_policies=self.pod_policies)
        for key, body in self._db.execute(
                "SELECT kind, body FROM objects WHERE uid = ? AND namespace = ? ORDER BY seq",
                (str(job.uid), job.namespace)):
            one.add([json.loads(body)], self._refs[key])
        return one.for_job(job, backend)

    take = for_job  # a resync looks at each job once; its rows stay on disk, costing no memory


def spilled_snapshot(api, served: set[str]) -> SpilledSnapshot:
    """observed.snapshot's LISTs (every kind gangweb creates, across namespaces, by the instance label), paginated
    and filed on disk page by page. StoredVersionUnreadable of a gang kind is recorded in `unreadable` as there;
    any other failure closes the file and raises."""
    selector = f"{LABEL_INSTANCE}={instance_label()}"
    snap = SpilledSnapshot()
    try:
        kinds = registry.gang_kinds(served)
        for ref in [*kinds, JOB, SERVICE, POD]:
            try:
                for page in objects.list_pages(api, ref, None, selector, projection(ref),
                                               on_restart=lambda ref=ref: snap.drop(ref)):
                    snap.add(page, ref)
            except TransientKubeError as exc:
                if ref not in kinds or exc.reason != STORED_VERSION_UNREADABLE:
                    raise
                snap.drop(ref)
                snap.unreadable[kind_key(ref)] = exc
    except BaseException:
        snap.close()
        raise
    return snap
