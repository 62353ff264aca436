"""A live gangweb web server for the CLI tests, and a runner for the installed `gangweb` console script.

The server is gunicorn (`gangweb.wsgi`, one gthread worker, as the docker image runs it) on a free port, serving
the test database: tests that use it need `django_db(transaction=True)` so their rows are committed and visible
to it. Its Celery tasks go to a filesystem broker in a temporary folder that nothing consumes: reconcile, where a
test needs it, runs in the test process (`Reconciler`), as the other cluster tests run it.
"""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import requests
from django.db import connection

ROOT = Path(__file__).resolve().parents[2]


def gangweb_script() -> str:
    """The `gangweb` console script installed next to this Python (make test installs ./client)."""
    script = Path(sys.executable).parent / "gangweb"
    if not script.exists():
        raise AssertionError(f"{script} is missing: install the client with `{sys.executable} -m pip install -e "
                             f"./client` (make test does)")
    return str(script)


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def database_url() -> str:
    """The test database as a DATABASE_URL for another process."""
    db = connection.settings_dict
    if db["ENGINE"].endswith("sqlite3"):
        return f"sqlite:///{db['NAME']}"
    return f"postgres://{db['USER']}:{db['PASSWORD']}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{db['NAME']}"


class Server:
    """gunicorn serving the test database on `url`; `stop()` kills it (the whole process group it leads)."""

    def __init__(self, state_dir: Path, threads: int = 16, extra_env: dict | None = None):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = state_dir / "gunicorn.log"
        env = {**os.environ, "DATABASE_URL": database_url(), "GANGWEB_TESTING": "1", "GANGWEB_STATE_DIR":
               str(state_dir), "GANGWEB_WAIT_POLL_SECONDS": "0.2", "DJANGO_SETTINGS_MODULE": "gangweb.settings",
               **(extra_env or {})}
        env.pop("REDIS_URL", None)
        with open(self.log, "wb") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "gunicorn", "gangweb.wsgi", "--bind", f"127.0.0.1:{self.port}",
                 "--worker-class", "gthread", "--workers", "1", "--threads", str(threads), "--timeout", "60"],
                cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + 60
        while True:
            try:
                if requests.get(f"{self.url}/api/v1/", timeout=2).status_code in (200, 401, 403):
                    return
            except requests.RequestException:
                pass
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise AssertionError(f"gunicorn did not start: {self.log.read_text()[-3000:]}")
            time.sleep(0.3)

    def stop(self) -> None:
        """Kill the server at once (SIGKILL to its process group), as a crash or a node loss would."""
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=10)


def cli_env(server_url: str, token: str | None, config_dir: Path, **extra) -> dict:
    """Environment for the console script: server, token, a private config file, 1 retry unless said."""
    # This checkout's client first: the console script may come from an editable install of another checkout
    # (a shared venv), whose package would otherwise be the one tested.
    path = os.pathsep.join(p for p in (str(ROOT / "client" / "src"), os.environ.get("PYTHONPATH", "")) if p)
    env = {**os.environ, "GANGWEB_URL": server_url, "GANGWEB_CONFIG": str(config_dir / "config.yaml"),
           "GANGWEB_RETRIES": "1", "COLUMNS": "200", "PYTHONPATH": path, **extra}
    env.pop("GANGWEB_TOKEN", None)
    if token:
        env["GANGWEB_TOKEN"] = token
    return env


def run_cli(args: list[str], env: dict, timeout: float = 120, stdin: str | None = None) -> subprocess.CompletedProcess:
    """Run `gangweb <args>`; the CompletedProcess with text stdout/stderr."""
    return subprocess.run([gangweb_script(), *args], env=env, capture_output=True, text=True, timeout=timeout,
                          input=stdin)


def start_cli(args: list[str], env: dict) -> subprocess.Popen:
    """Start `gangweb <args>` in the background (text pipes)."""
    return subprocess.Popen([gangweb_script(), *args], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)


def read_stderr_until(proc: subprocess.Popen, pattern: str, timeout: float = 60) -> str:
    """Read a started CLI's stderr line by line until a line matches the regex `pattern`; return what was read.
    Raises AssertionError (with the text so far) if the process ends or `timeout` seconds pass first. The CLI's
    stderr is line-buffered (Python 3.9+), so each progress line arrives when printed."""
    import re
    import select

    text, deadline = "", time.monotonic() + timeout
    while time.monotonic() < deadline:
        ready, _, _ = select.select([proc.stderr], [], [], max(0.0, deadline - time.monotonic()))
        if not ready:
            break
        line = proc.stderr.readline()
        if not line:  # EOF: the process ended
            break
        text += line
        if re.search(pattern, line):
            return text
    raise AssertionError(f"no line matching {pattern!r} on the CLI's stderr; got: {text[-2000:]}")


def phases_printed(stderr: str) -> dict[int, list[str]]:
    """{job id: [phase, ...]} in the order the CLI printed its plain progress lines ("12:00:01 job 7 name: Running
    (reason)")."""
    import re

    out: dict[int, list[str]] = {}
    for match in re.finditer(r"^\d\d:\d\d:\d\d job (\d+) \S+: (\w+)", stderr, re.MULTILINE):
        out.setdefault(int(match[1]), []).append(match[2])
    return out


class Reconciler:
    """Reconcile passes of every active job, in a thread of the test process, every `interval` seconds: what a
    Celery worker and the cluster watcher do between them, one pass at a time."""

    def __init__(self, interval: float = 0.5):
        self.interval, self._stop, self.errors = interval, threading.Event(), []
        self._thread = threading.Thread(target=self._run, name="test-reconciler", daemon=True)

    def __enter__(self) -> Reconciler:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(timeout=60)

    def _run(self) -> None:
        from django.db import connection as conn

        from scheduling.choices import TERMINAL_PHASES
        from scheduling.models import GangJob
        from scheduling.reconcile import jobs as job_reconcile

        try:
            while not self._stop.is_set():
                active = GangJob.objects.exclude(phase__in=list(TERMINAL_PHASES)).select_related("cluster", "queue")
                for job in active:
                    try:
                        job_reconcile.run_pass(job)
                    except Exception as exc:  # noqa: BLE001 - kept for the test to report
                        self.errors.append(f"job {job.pk}: {exc!r}")
                self._stop.wait(self.interval)
        finally:
            conn.close()


class DroppingProxy:
    """An HTTP proxy in front of `upstream` (a base URL) on `url`. The first `drops` POSTs to `path` are forwarded
    and answered by the server, and then the client's connection is closed without the answer: a connection lost
    after the request was sent, which a client can only retry. `posts` counts the POSTs to `path` it saw."""

    def __init__(self, upstream: str, path: str, drops: int = 1):
        import http.client
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
        from urllib.parse import urlsplit

        target = urlsplit(upstream)
        proxy = self
        self.posts, self.drops = 0, drops

        class Handler(BaseHTTPRequestHandler):
            def _forward(self):
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                upstream_conn = http.client.HTTPConnection(target.hostname, target.port, timeout=60)
                headers = {k: v for k, v in self.headers.items() if k.lower() not in ("connection", "host")}
                upstream_conn.request(self.command, self.path, body=body, headers=headers)
                answer = upstream_conn.getresponse()
                data = answer.read()
                upstream_conn.close()
                if self.command == "POST" and self.path == path:
                    proxy.posts += 1
                    if proxy.posts <= proxy.drops:
                        self.close_connection = True
                        self.connection.shutdown(socket.SHUT_RDWR)  # the server acted; the client hears nothing
                        return
                self.send_response(answer.status)
                for key, value in answer.getheaders():
                    if key.lower() not in ("connection", "transfer-encoding", "content-length"):
                        self.send_header(key, value)
                self.send_header("Content-Length", str(len(data)))
                self.send_header("Connection", "close")
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = _forward

            def log_message(self, *args):
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    def close(self) -> None:
        """Stop serving."""
        self._server.shutdown()
        self._server.server_close()
