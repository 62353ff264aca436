"""A pass's independent requests sent at once: the creates of a job's objects that need only what already exists
(reconciler.py `create_members`: after the root, its PodGroup and Service together, then its Indexed Jobs
together), so a job costs fewer round trips one after the other (bench/README.md, "Reconcile against the API
server's ceiling").

The first call runs in the caller's thread, the others in one thread pool per process of
`settings.GANGWEB_RECONCILE_THREADS` threads (made on first use, again after a fork: Celery's prefork children
each get their own), so one process has at most twice that many of these requests in flight, whatever the number
of passes running. The pool's threads send API requests only: nothing in them touches the database (each thread
would open a connection of its own). Every request still takes a token of the cluster's client rate limit first
(kube/throttle.py wraps the ApiClient's REST client, whichever thread calls it)."""
from __future__ import annotations

import os
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from django.conf import settings

_lock = threading.Lock()
_pool: dict[int, ThreadPoolExecutor] = {}  # by process id: a pool's threads do not survive a fork


@dataclass(frozen=True)
class Answer:
    """How one call ended: its return value, or the exception it raised (`error`)."""

    value: Any = None
    error: Exception | None = None

    def get(self) -> Any:
        """The value, or raise the call's exception."""
        if self.error is not None:
            raise self.error
        return self.value


def _answer(call: Callable[[], Any]) -> Answer:
    try:
        return Answer(value=call())
    except Exception as exc:  # noqa: BLE001 - handed back to the caller, who raises or records it (`Answer.get`)
        return Answer(error=exc)


def _executor() -> ThreadPoolExecutor:
    pid = os.getpid()
    with _lock:
        pool = _pool.get(pid)
        if pool is None:
            _pool.clear()  # a parent's pool (after a fork): its threads are not in this process
            pool = _pool[pid] = ThreadPoolExecutor(max_workers=max(1, settings.GANGWEB_RECONCILE_THREADS),
                                                   thread_name_prefix="reconcile-fanout")
        return pool


def at_once(calls: list[Callable[[], Any]]) -> list[Answer]:
    """Run `calls` (no arguments each) concurrently and wait for all of them: the first here, the rest in the
    process's pool. Returns their `Answer`s in the order of `calls`; no exception of a call escapes unreturned
    (an Exception is returned in its Answer; a BaseException such as KeyboardInterrupt propagates)."""
    if len(calls) <= 1:
        return [_answer(call) for call in calls]
    futures = [_executor().submit(_answer, call) for call in calls[1:]]
    first = _answer(calls[0])
    return [first, *(future.result() for future in futures)]
