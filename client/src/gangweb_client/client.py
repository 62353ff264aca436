"""The Python SDK: `Client(url, token)` and its methods, one per API operation the CLI offers."""
from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Iterable
from urllib.parse import parse_qs, quote, urlsplit

from .errors import InputError, NotFound
from .models import Job, TimelineEntry, WaitResult
from .transport import Transport

WAIT_MAX_IDS = 500  # the server's limit per wait request (scheduling/services/jobs/wait.py MAX_IDS)
WAIT_POLL_SECONDS = 25.0  # the server's longest long-poll
PAGE = 1000


def _cursor_of(url: str | None) -> str | None:
    """The `cursor` of a job list's `next` link (GET /api/v1/jobs/ pages by keyset); None at the end."""
    if not url:
        return None
    values = parse_qs(urlsplit(url).query).get("cursor")
    return values[0] if values else None


class Client:
    """A gangweb API client.

    `url`: the server, e.g. "https://gangweb.example.com" (the API is under /api/v1/); `token`: an API token
    (`gw_...`, see `gangweb login`). Keyword arguments go to `Transport` (retries, backoff, timeout, verify).
    Every method raises ApiError (NotFound, Unauthorized) when the API refuses, and TransportError when the
    server cannot be reached after the retries.
    """

    def __init__(self, url: str, token: str | None = None, **transport):
        if not url:
            raise InputError("no server URL: pass --url, set GANGWEB_URL or run 'gangweb login'")
        self.url = url.rstrip("/")
        self.transport = Transport(self.url, token, **transport)

    # --- jobs ------------------------------------------------------------------------------------------------

    def submit(self, jobs: dict | list[dict], idempotency_key: str | None = None) -> list[Job]:
        """Submit one job (a submit body: name, template, queue, cluster, namespace, overrides, ...) or several
        (a list: one bulk request, all created or none). Returns the created jobs in order (detail form for one,
        list form for several).

        Every call sends an Idempotency-Key (a new UUID unless `idempotency_key` is given) and its own retries
        reuse it, so a retry after a dropped connection answers with the jobs the first attempt created instead
        of creating them twice."""
        key = idempotency_key or str(uuid.uuid4())
        headers = {"Idempotency-Key": key}
        if isinstance(jobs, dict):
            jobs = [jobs]
        if not jobs:
            raise InputError("nothing to submit: the input holds no job")
        if len(jobs) == 1:
            data = self.transport.request("POST", "jobs/", json=jobs[0], headers=headers, repeatable=True)
            return [Job.from_api(data)]
        data = self.transport.request("POST", "jobs/bulk/", json={"jobs": jobs}, headers=headers, repeatable=True)
        return [Job.from_api(job) for job in data["jobs"]]

    def get(self, job_id: int) -> Job:
        """One job with its timeline, durations, why_pending and resolved spec (detail form)."""
        return Job.from_api(self.transport.request("GET", f"jobs/{int(job_id)}/"))

    def jobs(self, *, limit: int | None = 50, **filters) -> list[Job]:
        """Jobs, newest first, filtered as the API's job list: queue, phase (one or a list), cluster, submitter,
        namespace, template, q (name contains), created_after, created_before (ISO 8601), ordering. `limit` None
        reads every page."""
        params = {k: v for k, v in filters.items() if v not in (None, "", [], ())}
        out: list[Job] = []
        cursor = None
        while True:  # keyset pages: each follows the `cursor` of the previous page's `next` link
            size = PAGE if limit is None else min(PAGE, limit - len(out))
            page = self.transport.request("GET", "jobs/", params={**params, "limit": size,
                                                                  **({"cursor": cursor} if cursor else {})})
            out.extend(Job.from_api(row) for row in page["results"])
            cursor = _cursor_of(page.get("next"))
            if not cursor or not page["results"] or (limit is not None and len(out) >= limit):
                return out

    def timeline(self, job_id: int) -> list[TimelineEntry]:
        """The job's phase history, in order."""
        return [TimelineEntry.from_api(e) for e in self.transport.request("GET", f"jobs/{int(job_id)}/timeline/")]

    def logs(self, job_id: int, *, pod_set: str | None = None, index: int | None = None,
             container: str | None = None, tail_lines: int | None = None, since_seconds: int | None = None,
             previous: bool = False, follow: bool = False):
        """A container of the job's log (GET /api/v1/jobs/<id>/logs/): the open `requests.Response`, whose
        `iter_content(None)` yields the bytes as they come and whose headers name what was read
        (`X-Gangweb-Log-Pod`, `-Container`, `-Pod-Set`, `-Index`) and whether the server cut it at its byte cap
        (`X-Gangweb-Log-Truncated: true`). Without pod_set/index/container: the container that failed first, else
        the first pod's first. `follow` streams new lines until the server's time bound. Close it when done."""
        params = {"pod_set": pod_set, "index": index, "container": container, "tail_lines": tail_lines,
                  "since_seconds": since_seconds, "previous": "true" if previous else None,
                  "follow": "true" if follow else None}
        params = {k: v for k, v in params.items() if v is not None and v != ""}
        # a follow stream may be quiet for minutes: no read timeout of its own beyond the server's bound
        return self.transport.stream(f"jobs/{int(job_id)}/logs/", params=params,
                                     read_timeout=3600 if follow else None)

    def cancel(self, job_ids: Iterable[int]) -> list[Job]:
        """Cancel each job (its cluster objects are deleted; it ends Cancelled). Returns the jobs as answered.
        Stops at the first refusal (ApiError); the jobs before it stay cancelled."""
        return [Job.from_api(self.transport.request("POST", f"jobs/{int(i)}/cancel/")) for i in job_ids]

    def resubmit(self, job_id: int) -> Job:
        """Submit a finished job again as a new job with the same inputs; returns the new job."""
        return Job.from_api(self.transport.request("POST", f"jobs/{int(job_id)}/resubmit/"))

    def wait(self, job_ids: Iterable[int], timeout: float | None = None,
             on_change: Callable[[Job, TimelineEntry], None] | None = None,
             on_state: Callable[[list[Job]], None] | None = None) -> WaitResult:
        """Wait until every job is terminal now (Succeeded, Failed or Cancelled), or `timeout` seconds pass.

        Uses the server's long-poll (`GET /api/v1/jobs/wait/`): one request per change or per 25 s, not one per
        job per second. Each answer is the current state of every job, and the wait ends only when that state
        has all of them terminal, never on an event history (armada #4467). `on_change(job, entry)` is called
        once per timeline entry, in order, starting with the entries the jobs already have; `on_state(jobs)`
        after every answer with every job's current state. More than 500 jobs are waited on in groups of 500,
        one thread each.

        Returns a WaitResult (its `exit_code` is the CLI's); `timed_out` is True when time ran out first.
        Raises NotFound naming the ids that do not exist or that the token may not see."""
        ids = list(dict.fromkeys(int(i) for i in job_ids))
        if not ids:
            raise InputError("no job ids to wait on")
        deadline = None if timeout is None else time.monotonic() + max(0.0, timeout)
        state: dict[int, Job] = {}
        seen: dict[int, set[tuple[str, int]]] = {i: set() for i in ids}
        lock = threading.Lock()
        timed_out = threading.Event()

        def follow(chunk: list[int]) -> None:
            cursor = ""
            while True:
                remaining = None if deadline is None else deadline - time.monotonic()
                poll = 0.0 if not cursor else WAIT_POLL_SECONDS if remaining is None else \
                    max(0.0, min(WAIT_POLL_SECONDS, remaining))
                data = self.transport.request(
                    "GET", "jobs/wait/", params={"ids": ",".join(map(str, chunk)), "after": cursor,
                                                 "timeout": f"{poll:.1f}"}, read_timeout=poll + self.transport.timeout)
                if data["missing"]:
                    raise NotFound(404, {"ids": [f"no job {', '.join(map(str, data['missing']))} that you can see"]},
                                   "GET", "jobs/wait/")
                with lock:
                    for raw in data["jobs"]:
                        job = Job.from_api(raw)
                        state[job.id] = job
                        for entry in job.timeline:
                            if (entry.phase, entry.attempt) not in seen[job.id]:
                                seen[job.id].add((entry.phase, entry.attempt))
                                if on_change:
                                    on_change(job, entry)
                    if on_state:
                        on_state([state[i] for i in ids if i in state])
                if data["all_terminal"]:
                    return
                if deadline is not None and time.monotonic() >= deadline:
                    timed_out.set()
                    return
                cursor = data["cursor"]

        chunks = [ids[i:i + WAIT_MAX_IDS] for i in range(0, len(ids), WAIT_MAX_IDS)]
        if len(chunks) == 1:
            follow(chunks[0])
        else:
            _run_threads(follow, chunks)
        return WaitResult(jobs=tuple(state[i] for i in ids if i in state), timed_out=timed_out.is_set())

    # --- everything else ---------------------------------------------------------------------------------------

    def queues(self, cluster: str | None = None) -> dict:
        """The queue tree: `{"units": {...}, "roots": [node, ...]}` with quota, limit, allocated and requested
        per resource (KAI units), warnings and sync state per queue."""
        return self.transport.request("GET", "queues/tree/", params={"cluster": cluster} if cluster else None)

    def templates(self) -> list[dict]:
        """Runtime templates you can see (API form), by name."""
        return self._all("templates/")

    def template(self, name: str) -> dict:
        """One runtime template with its latest spec."""
        return self.transport.request("GET", f"templates/{name}/")

    def capacity(self, cluster: str, offset: int = 0, limit: int = 50) -> dict:
        """A cluster's capacity: schedulable nodes, allocatable, in use by gangweb's jobs and by other pods, free;
        in total, per GPU type and per node (`node_rows`, paginated). Amounts in GPUs, CPU cores, GiB (`units`)."""
        return self.transport.request("GET", f"clusters/{quote(cluster, safe='')}/capacity/",
                                      params={"offset": offset, "limit": limit})

    def clusters(self) -> list[dict]:
        """Clusters you can see, with health, version, served scheduling APIs and backends."""
        return self._all("clusters/")

    def create_token(self, name: str, actions: list[str] | None = None, queues: list[str] | None = None,
                     expires_at: str | None = None) -> dict:
        """Create an API token (needs a password login: construct the Client with `basic=(user, password)`).
        Returns the API's answer; its `token` is the secret, shown only this once."""
        body: dict = {"name": name}
        if actions:
            body["actions"] = actions
        if queues:
            body["queues"] = queues
        if expires_at:
            body["expires_at"] = expires_at
        return self.transport.request("POST", "tokens/", json=body)

    def _all(self, path: str) -> list[dict]:
        out: list[dict] = []
        while True:
            page = self.transport.request("GET", path, params={"limit": PAGE, "offset": len(out)})
            if isinstance(page, list):
                return page
            out.extend(page["results"])
            if not page.get("next") or not page["results"]:
                return out

    def close(self) -> None:
        """Close the HTTP connections."""
        self.transport.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _run_threads(target: Callable[[list[int]], None], chunks: list[list[int]]) -> None:
    """Run `target(chunk)` for each chunk in its own daemon thread (so an error in one does not leave the process
    waiting for the others' long-polls at exit); re-raise the first error."""
    errors: list[BaseException] = []
    done = threading.Semaphore(0)

    def run(chunk):
        try:
            target(chunk)
        except BaseException as exc:  # noqa: BLE001 - handed to the calling thread
            errors.append(exc)
        finally:
            done.release()

    for chunk in chunks:
        threading.Thread(target=run, args=(chunk,), daemon=True).start()
    for _ in chunks:
        done.acquire()
        if errors:
            raise errors[0]
