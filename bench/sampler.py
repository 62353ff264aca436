"""A sampling profiler that sees every thread of the process (stdlib only): pyinstrument's profiler follows the
thread that started it, and a reconcile batch runs its passes from GANGWEB_RECONCILE_THREADS threads.

Every `interval` seconds a daemon thread takes `sys._current_frames()` and files each other thread's stack:

- idle when the innermost Python frame is a blocking wait (a socket read, a lock, psycopg waiting for the server's
  answer, a select): what the thread waits on costs the process no CPU; the count says how much of the threads'
  time went so;
- otherwise active, under the first layer found walking out from the innermost frame (`LAYERS`: the database
  driver, Django's SQL compiler, the rest of the ORM, the Kubernetes client and urllib3, json, the crypto library,
  else gangweb's own code or "other"), and under gangweb's innermost frame (module:function), which names the call
  site that spent it.

A sample is a wall-clock instant, not CPU time: under load an active thread may be runnable but not running. Its
shares are of the active samples; the GIL lets one thread run Python at a time, so they add up to the process's
Python CPU, not to threads x wall time.
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
        self.layers: collections.Counter = collections.Counter()
        self.sites: collections.Counter = collections.Counter()
        self.leaves: collections.Counter = collections.Counter()
        self.idle = self.active = 0
        self.threads: set[int] = set()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.seconds = 0.0

    def start(self) -> None:
        self._t0 = time.monotonic()
        self._thread = threading.Thread(target=self._run, name="bench-sampler", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self.seconds = time.monotonic() - self._t0

    def _run(self) -> None:
        me = threading.get_ident()
        while not self._stop.wait(self.interval):
            for ident, frame in sys._current_frames().items():
                if ident != me:
                    self._file(ident, frame)

    def _file(self, ident: int, frame) -> None:
        if _idle(frame.f_code):
            self.idle += 1
            return
        self.active += 1
        self.threads.add(ident)
        leaf = frame.f_code
        self.leaves[f"{_short(leaf.co_filename)}:{leaf.co_name}"] += 1
        layer = site = None
        while frame is not None and (layer is None or site is None):
            path = frame.f_code.co_filename
            if layer is None:
                layer = next((name for fragment, name in LAYERS if fragment in path), None)
            if site is None and self.root in path:
                site = f"{_short(path)}:{frame.f_code.co_name}"
                layer = layer or "gangweb's own code"
            frame = frame.f_back
        self.layers[layer or "other (stdlib, Celery, Django outside the ORM)"] += 1
        self.sites[site or "outside gangweb's code"] += 1

    def report(self, top: int = 25) -> str:
        """The shares as text: layers, gangweb's call sites and the innermost functions, each in % of the active
        samples."""
        total = self.active or 1
        lines = [f"{self.active + self.idle} samples in {self.seconds:.1f} s every {self.interval * 1000:g} ms over "
                 f"{len(self.threads)} active thread(s): {self.active} active, {self.idle} idle (waiting on a socket, "
                 "a lock or the database)", "", "Active samples by layer (innermost layer of the stack):"]
        lines += [f"  {100 * n / total:5.1f} %  {name}" for name, n in self.layers.most_common()]
        lines += ["", "Active samples by gangweb's innermost call site (what called the layer above):"]
        lines += [f"  {100 * n / total:5.1f} %  {name}" for name, n in self.sites.most_common(top)]
        lines += ["", "Active samples by innermost Python function:"]
        lines += [f"  {100 * n / total:5.1f} %  {name}" for name, n in self.leaves.most_common(top)]
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
