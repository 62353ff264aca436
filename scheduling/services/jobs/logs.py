"""A job's container logs, read through gangweb's own connection to its cluster (no kubectl for the tenant).

What is read: core/v1 `GET /api/v1/namespaces/{ns}/pods/{name}/log` (`container`, `tailLines`, `sinceSeconds`,
`previous`, `follow`, `limitBytes`), which kube-apiserver proxies to the node's kubelet. Only a pod that is the
job's is asked: in the job's namespace, with a controller reference to a batch/v1 Job whose UID gangweb recorded
at create (`GangJob.owner_uids`); the job-UID label only narrows the LIST. Whoever may view the job may read its
logs (the API view checks that, as the job detail does).

Bounds: at most `GANGWEB_LOG_MAX_BYTES` bytes per answer (sent to the cluster as `limitBytes` and enforced here
too; Kubernetes keeps the start of the log under `limitBytes`: ask with `tail_lines` or `since_seconds` for the
end); a `follow` stream ends after `GANGWEB_LOG_FOLLOW_SECONDS` (the socket is shut from a timer, so a quiet
container cannot hold the stream past it) or at the byte cap. Redirects are never followed (kube/client.py).
"""
from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass

from django.conf import settings
from kubernetes import client

from ...constants import LABEL_JOB_UID
from ...models import GangJob
from ...observe import objects as o
from ...observe.failure import completion_index as _index
from ...observe.failure import pod_set_of as _pod_set
from ...observe.pods import controller_job_uid

NO_PODS = "the job has no pods in its cluster (not started yet, or removed after the retention)"
READ_TIMEOUT_S = 30  # one non-follow read: the cluster answers within this or the request fails (502)
CHUNK = 16 * 1024


@dataclass(frozen=True)
class LogQuery:
    """What the caller asked: which pod (`pod_set`, `index`: "" / None for gangweb's choice), which `container`
    ("" for the failed one, else the pod's first), and the core/v1 PodLogOptions it maps to."""

    pod_set: str = ""
    index: int | None = None
    container: str = ""
    tail_lines: int | None = None
    since_seconds: int | None = None
    previous: bool = False
    follow: bool = False


class LogTargetError(Exception):
    """No pod or container of the job matches: `field` names the query parameter, `status` the HTTP status to
    answer (404 nothing to read, 400 a name that is not one of the pod's containers)."""

    def __init__(self, field: str, message: str, status: int = 404):
        super().__init__(message)
        self.field, self.message, self.status = field, message, status


@dataclass
class LogAnswer:
    """The pod and container read, and either `body` (bytes, at most the cap, with `truncated`) or `chunks` (a
    follow stream's iterator of bytes)."""

    pod: str
    container: str
    pod_set: str
    index: int | None
    body: bytes = b""
    truncated: bool = False
    chunks: Iterator[bytes] | None = None


def max_bytes() -> int:
    """The byte cap of one answer (`GANGWEB_LOG_MAX_BYTES`, at least 1 KiB)."""
    return max(1024, int(getattr(settings, "GANGWEB_LOG_MAX_BYTES", 1024 * 1024)))


def follow_seconds() -> float:
    """How long a follow stream lasts at most (`GANGWEB_LOG_FOLLOW_SECONDS`, at least 1 s)."""
    return max(1.0, float(getattr(settings, "GANGWEB_LOG_FOLLOW_SECONDS", 300)))


def _containers(pod: dict) -> list[str]:
    spec = pod.get("spec") if isinstance(pod.get("spec"), dict) else {}
    names = []
    for key in ("containers", "initContainers"):
        names += [c["name"] for c in spec.get(key) or [] if isinstance(c, dict) and isinstance(c.get("name"), str)]
    return names


def job_pods(job: GangJob, core: client.CoreV1Api) -> list[dict]:
    """The job's pods (Pod dicts) in its namespace: those whose controller reference names a Job UID gangweb
    recorded for the job, ordered by pod set, index and creation. One LIST by the job-UID label."""
    recorded = {uid for uid in (job.owner_uids or {}).values() if isinstance(uid, str) and uid}
    if not recorded:
        return []
    listed = json.loads(core.list_namespaced_pod(job.namespace, label_selector=f"{LABEL_JOB_UID}={job.uid}",
                                                 _preload_content=False, _request_timeout=(5, 30)).data)
    pods = [p for p in listed.get("items") or [] if isinstance(p, dict)
            and o.meta(p).get("namespace", job.namespace) == job.namespace and controller_job_uid(p) in recorded]
    return sorted(pods, key=lambda p: (_pod_set(p), _index(p) if _index(p) is not None else -1,
                                       str(o.meta(p).get("creationTimestamp") or ""), str(o.meta(p).get("name"))))


def choose(job: GangJob, pods: list[dict], query: LogQuery) -> tuple[dict, str]:
    """(pod, container) to read. Without a pod set or index: the pod of the job's first failure
    (`observed["failure"]`) when it is still there, else the first pod. Of several pods at one index (retries),
    the newest. Without a container: the failure's when reading its pod, else the pod's first container.
    Raises LogTargetError naming the parameter that matched nothing."""
    if not pods:
        raise LogTargetError("detail", NO_PODS)
    failure = (job.observed or {}).get("failure") if isinstance(job.observed, dict) else None
    failure = failure if isinstance(failure, dict) else {}
    picked = pods
    if query.pod_set:
        picked = [p for p in picked if _pod_set(p) == query.pod_set]
        if not picked:
            sets = sorted({_pod_set(p) for p in pods})
            raise LogTargetError("pod_set", f"no pod of pod set {query.pod_set!r}; the job's: {', '.join(sets)}")
    if query.index is not None:
        picked = [p for p in picked if _index(p) == query.index]
        if not picked:
            raise LogTargetError("index", f"no pod at index {query.index}")
    pod = None
    if not query.pod_set and query.index is None and failure.get("pod"):
        pod = next((p for p in picked if o.meta(p).get("name") == failure["pod"]), None)
    if pod is None:
        first = (_pod_set(picked[0]), _index(picked[0]))
        pod = [p for p in picked if (_pod_set(p), _index(p)) == first][-1]
    names = _containers(pod)
    container = query.container
    if container and container not in names:
        raise LogTargetError("container", f"pod {o.meta(pod).get('name')} has no container {container!r}; its "
                                          f"containers: {', '.join(names)}", status=400)
    if not container:
        if o.meta(pod).get("name") == failure.get("pod") and failure.get("container") in names:
            container = failure["container"]
        elif names:
            container = names[0]
        else:
            raise LogTargetError("container", "the pod names no container")
    return pod, container


def _options(query: LogQuery, container: str) -> dict:
    opts = {"container": container, "limit_bytes": max_bytes() + 1}
    if query.previous:
        opts["previous"] = True
    if query.tail_lines is not None:
        opts["tail_lines"] = query.tail_lines
    if query.since_seconds is not None:
        opts["since_seconds"] = query.since_seconds
    return opts


def read(job: GangJob, query: LogQuery, api: client.ApiClient | None = None) -> LogAnswer:
    """The log of the chosen container (`choose`): a whole answer, or with `query.follow` a stream. Raises
    LogTargetError when nothing matches, kubernetes ApiException or urllib3 errors when the cluster cannot be asked
    or refuses (a container not started yet, no previous container: the cluster's 400)."""
    if not any(isinstance(uid, str) and uid for uid in (job.owner_uids or {}).values()):
        raise LogTargetError("detail", NO_PODS)  # nothing created yet: the cluster is not asked
    if api is None:
        from ...kube.client import api_client

        api = api_client(job.cluster)
    core = client.CoreV1Api(api)
    pod, container = choose(job, job_pods(job, core), query)
    name = o.meta(pod).get("name")
    answer = LogAnswer(pod=name, container=container, pod_set=_pod_set(pod), index=_index(pod))
    cap = max_bytes()
    if query.follow:
        limit = follow_seconds()
        resp = core.read_namespaced_pod_log(name, job.namespace, follow=True, _preload_content=False,
                                            _request_timeout=(5, limit + 5), **_options(query, container))
        answer.chunks = _stream(resp, cap, limit)
        return answer
    resp = core.read_namespaced_pod_log(name, job.namespace, _preload_content=False,
                                        _request_timeout=(5, READ_TIMEOUT_S), **_options(query, container))
    try:
        data = resp.read(cap + 1)
    finally:
        resp.release_conn()
    answer.body, answer.truncated = data[:cap], len(data) > cap
    return answer


HEADER_SAFE = re.compile(r"[^A-Za-z0-9._-]")


def header_value(name) -> str:
    """A cluster-given name fit for a response header: the characters a Kubernetes name or label value may hold,
    at most 253 (a hostile cluster's newline or control character would otherwise break the answer)."""
    return HEADER_SAFE.sub("?", str(name or ""))[:253]


def cut_notice(cap: int) -> bytes:
    """The last line of an answer cut at the byte cap."""
    return (f"\n[gangweb: log cut at {cap} bytes (GANGWEB_LOG_MAX_BYTES); ask with tail_lines or since_seconds "
            f"for the rest]\n").encode()


def _stream(resp, cap: int, seconds: float) -> Iterator[bytes]:
    """The follow stream's chunks as they come, until the container's log ends, `seconds` pass (a timer shuts the
    socket, so a silent container cannot hold it open) or `cap` bytes were sent; then one line saying which."""
    timer = threading.Timer(seconds, resp.shutdown)
    timer.daemon = True
    timer.start()
    started, sent, why = time.monotonic(), 0, ""
    try:
        while True:
            try:
                chunk = resp.read1(CHUNK)
            except Exception:  # noqa: BLE001 - the timer's shutdown (or the peer) ended the read: the stream is over
                chunk = b""
            if not chunk:
                if time.monotonic() - started >= seconds - 0.05:
                    why = f"\n[gangweb: stream ended after {seconds:g} s (GANGWEB_LOG_FOLLOW_SECONDS)]\n"
                break
            if sent + len(chunk) > cap:
                yield chunk[:cap - sent]
                why = cut_notice(cap).decode()
                break
            sent += len(chunk)
            yield chunk
        if why:
            yield why.encode()
    finally:
        timer.cancel()
        resp.close()
