"""A sampling profiler that sees every thread of the process (stdlib only): pyinstrument's profiler follows the
thread that started it, and a reconcile batch runs its passes from GANGWEB_RECONCILE_THREADS threads.

Every `interval` seconds a daemon thread takes `sys._current_frames()` and reads each other thread's CPU clock
(`time.pthread_getcpuclockid`): the CPU the thread spent since its previous sample is charged to the stack it is
in now, under the first layer found walking out from the innermost frame (`LAYERS`: the database driver, Django's
SQL compiler, the rest of the ORM, the Kubernetes client and urllib3, json, the crypto library, else gangweb's own
code or "other"), and under gangweb's innermost frame (module:function), which names the call site that spent it.
So time a thread waits (on a socket, a lock, the database's answer) costs nothing, and CPU spent in C (libpq,
TLS, row conversion) is charged to its Python caller. Counting samples instead would charge waits: the sampler
needs the GIL, so it mostly finds the other threads where they released it, at their I/O.

The charge is approximate: CPU spent since the previous sample may have been spent in a call the thread has left
since (at a 2 ms interval, the calls of one statement or request); and since the sampler needs the GIL, it runs
mostly when a thread lets the GIL go, at its I/O, so the charge leans towards the call sites that do I/O (the
switch interval is lowered to 0.5 ms while sampling to lessen that).
"""
from __future__ import annotations

import collections
import sys
import threading
import time

# (path fragment, layer) in order: the first fragment found walking out from the innermost frame names the layer.
LAYERS = (
    ("/psycopg/", "database driver (psycopg: statements sent, rows converted)"),
    ("/psycopg_binary/", "database driver (psycopg: statements sent, rows converted)"),
    ("/django/db/models/sql/", "Django ORM: SQL compilation"),
    ("/django/db/backends/", "Django database backend (cursor wrappers, connection set-up)"),
    ("/django/db/", "Django ORM: querysets and model instances"),
    ("/kubernetes/", "Kubernetes client (serialize, deserialize, HTTP)"),
    ("/urllib3/", "Kubernetes client (serialize, deserialize, HTTP)"),
    ("/http/client.py", "Kubernetes client (serialize, deserialize, HTTP)"),
    ("/json/", "json"),
    ("/cryptography/", "cryptography (credentials)"),
    ("/yaml/", "YAML (kubeconfig)"),
    ("/logging/", "logging"),
)
# Innermost frames that block without spending CPU: (file suffix, function names, or None for any function).
IDLE = (
    ("threading.py", {"wait", "_wait_for_tstate_lock", "join", "acquire"}),
    ("selectors.py", None),
    ("socket.py", {"readinto", "create_connection", "accept"}),
    ("ssl.py", {"read", "recv_into", "recv", "do_handshake", "_real_connect", "connect"}),
    ("/psycopg/waiting.py", None),
    ("/psycopg/connection.py", {"wait", "_wait_conn"}),
    ("/psycopg/generators.py", None),
    ("queue.py", {"get"}),
    ("concurrent/futures/thread.py", {"_worker"}),
    ("time.py", {"sleep"}),
)


def _idle(code) -> bool:
    for suffix, names in IDLE:
        if code.co_filename.endswith(suffix) or suffix.startswith("/") and suffix in code.co_filename:
            if names is None or code.co_name in names:
                return True
    return False


class Sampler:
    """Sample every thread but the sampler's own; `start()`, the work, `stop()`, then `report()`."""

    def __init__(self, interval: float = 0.002, root: str = "/scheduling/"):
        self.interval = interval
        self.root = root
        self.layers: collections.Counter = collections.Counter()  # seconds of CPU
        self.sites: collections.Counter = collections.Counter()
        self.leaves: collections.Counter = collections.Counter()
        self.samples = self.idle = 0
        self.cpu = 0.0
        self.threads: set[int] = set()
        self._last: dict[int, float] = {}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.seconds = 0.0

    def start(self) -> None:
        self._switch = sys.getswitchinterval()
        # The sampler runs when it holds the GIL: a thread running Python gives it up only at I/O or when the
        # switch interval (5 ms) forces it, so a long interval charges CPU to I/O call sites (where the GIL is let
        # go). At 0.5 ms the sampler also finds threads in the middle of their Python work.
        sys.setswitchinterval(0.0005)
        self._t0 = time.monotonic()
        self._thread = threading.Thread(target=self._run, name="bench-sampler", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        sys.setswitchinterval(self._switch)
        self.seconds = time.monotonic() - self._t0

    def _run(self) -> None:
        me = threading.get_ident()
        while not self._stop.wait(self.interval):
            for ident, frame in sys._current_frames().items():
                if ident != me:
                    self._file(ident, frame, self._cpu_since_last(ident))

    def _cpu_since_last(self, ident: int) -> float:
        """CPU seconds thread `ident` spent since its previous sample (its POSIX thread CPU clock); 0 the first
        time it is seen, or when its clock cannot be read (it ended meanwhile)."""
        try:
            now = time.clock_gettime(time.pthread_getcpuclockid(ident))
        except (OSError, ValueError, OverflowError):
            return 0.0
        before = self._last.get(ident)
        self._last[ident] = now
        return 0.0 if before is None else max(0.0, now - before)

    def _file(self, ident: int, frame, cpu: float) -> None:
        self.samples += 1
        if _idle(frame.f_code):
            self.idle += 1
        if cpu <= 0.0:
            return
        self.cpu += cpu
        self.threads.add(ident)
        leaf = frame.f_code
        self.leaves[f"{_short(leaf.co_filename)}:{leaf.co_name}"] += cpu
        layer = site = None
        while frame is not None and (layer is None or site is None):
            path = frame.f_code.co_filename
            if layer is None:
                layer = next((name for fragment, name in LAYERS if fragment in path), None)
            if layer is None and self.root in path:
                layer = "gangweb's own code"
            if site is None and self.root in path and "/scheduling/db/" not in path:  # db/ helpers: their caller
                site = f"{_short(path)}:{frame.f_code.co_name}"
            frame = frame.f_back
        self.layers[layer or "other (stdlib, Celery, Django outside the ORM)"] += cpu
        self.sites[site or "outside gangweb's code"] += cpu

    def report(self, top: int = 25) -> str:
        """The CPU shares as text: layers, gangweb's call sites and the innermost functions, each in % of the CPU
        the sampled threads spent (and ms)."""
        total = self.cpu or 1.0

        def rows(counter, n=None):
            return [f"  {100 * v / total:5.1f} %  {1000 * v:8.1f} ms  {name}" for name, v in counter.most_common(n)]

        lines = [f"{self.samples} samples in {self.seconds:.1f} s every {self.interval * 1000:g} ms of "
                 f"{len(self.threads)} thread(s) that spent CPU: {1000 * self.cpu:.0f} ms of CPU "
                 f"({100 * self.idle / max(self.samples, 1):.0f} % of the samples found a thread waiting on a "
                 "socket, a lock or the database)",
                 "Each sample charges the CPU its thread spent since the previous one (its POSIX thread CPU clock) "
                 "to the stack it is in now.", "", "CPU by layer (innermost layer of the stack):"]
        lines += rows(self.layers)
        lines += ["", "CPU by gangweb's innermost call site (what called the layer above):"]
        lines += rows(self.sites, top)
        lines += ["", "CPU by innermost Python function:"]
        lines += rows(self.leaves, top)
        return "\n".join(lines) + "\n"


def _short(path: str) -> str:
    """A path from its package on (site-packages/…, scheduling/…): no machine paths in a report."""
    for marker in ("site-packages/", "/scheduling/"):
        at = path.find(marker)
        if at >= 0:
            return path[at + len(marker):] if marker != "/scheduling/" else "scheduling/" + path[at + 12:]
    at = path.find("/lib/python3")
    if at >= 0:  # the standard library: from the module on
        return path[path.index("/", at + 5) + 1:]
    return path.rsplit("/", 1)[-1]
