"""Fixtures of the fault runs: one private gangweb stack per pytest run (`bench.faultstack.FaultStack`), a fresh
namespace per test, and a pipeline that submits at a steady rate while a test breaks something.

The stack is started once (PostgreSQL from initdb, Redis, the control plane, gunicorn, a Celery worker, beat with a
5-second resync, the watcher; ~40-60 s) and torn down at the end, also when tests fail; a failing test's report
gets the tails of the stack's logs. Needs the local control plane's binaries (`make localcluster-build`), like
tests/cluster/, and PostgreSQL and Redis installed (never the machine's running servers: these get killed).
"""
from __future__ import annotations

import tempfile
import threading
import time
import uuid
from pathlib import Path

import pytest

import localcluster
from bench.faultstack import Client, FaultStack, create_namespace

_stacks: list[FaultStack] = []


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """On a failed fault test, append the tails of the stack's logs to its report."""
    outcome = yield
    report = outcome.get_result()
    if report.failed and _stacks:
        stack = _stacks[0]
        for name in ("worker", "watch", "beat", "web"):
            report.sections.append((f"{name}.log (tail)", "\n".join(stack.log_text(name).splitlines()[-40:])))


@pytest.fixture(scope="session")
def stack():
    """The run's private gangweb (FaultStack), all of it started."""
    try:
        localcluster.require_binaries()
    except localcluster.BinariesMissing as exc:
        pytest.fail(str(exc), pytrace=False)
    workdir = Path(tempfile.mkdtemp(prefix="gangweb-faults-"))
    with FaultStack(workdir) as s:
        _stacks.append(s)
        s.start(worker_concurrency=2, resync_seconds=5)
        yield s
        _stacks.clear()


@pytest.fixture(scope="session")
def kube(stack):
    """A kubernetes ApiClient of the stack's control plane."""
    return stack.cluster.api_client()


@pytest.fixture
def namespace(stack, kube) -> str:
    """A fresh namespace for one test's jobs, allowed to queue "default" (left behind: the control plane goes with
    the run)."""
    name = f"faults-{uuid.uuid4().hex[:8]}"
    create_namespace(kube, name)
    stack.allow_namespace(name)
    return name


@pytest.fixture
def client(stack) -> Client:
    """A pipeline's API client (token of the stack's admin; retries 503s with the same Idempotency-Key)."""
    return Client(stack.base_url, stack.token)


class Pipeline:
    """Submits `count` jobs from a thread, one every `interval` seconds, each retried until answered 201
    (`Client.submit`). `submitted` counts the 201s so far; `join()` waits for the last and re-raises its error."""

    def __init__(self, client: Client, namespace: str, count: int, interval: float, long_every: int = 3):
        self.client, self.namespace, self.count, self.interval = client, namespace, count, interval
        self.long_every = long_every  # every n-th job runs for an hour (stays live), the others for 15 s
        self.submitted = 0
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> Pipeline:
        self.thread.start()
        return self

    def _run(self) -> None:
        try:
            for i in range(self.count):
                template = "fault-long" if i % self.long_every == 0 else "fault-short"
                self.client.submit(f"job-{i}", self.namespace, template)
                self.submitted += 1
                time.sleep(self.interval)
        except BaseException as exc:  # re-raised by join() in the test's thread
            self.error = exc

    def wait_for(self, n: int, timeout: float = 120) -> None:
        """Block until `n` jobs were accepted."""
        deadline = time.monotonic() + timeout
        while self.submitted < n and self.error is None and time.monotonic() < deadline:
            time.sleep(0.1)
        assert self.error is None, self.error
        assert self.submitted >= n, f"only {self.submitted} of {n} submits answered in {timeout} s"

    def join(self, timeout: float = 300) -> None:
        self.thread.join(timeout)
        if self.error is not None:
            raise self.error
        assert self.submitted == self.count


@pytest.fixture
def pipeline(client, namespace):
    """Pipeline(...) factory bound to the test's client and namespace."""
    return lambda count, interval=0.25, long_every=3: Pipeline(client, namespace, count, interval, long_every)
