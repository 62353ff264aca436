"""Start what the benchmarks run against, and stop only what was started here.

- PostgreSQL: the Debian cluster (``pg_lsclusters``), started with ``pg_ctlcluster`` when down; a database
  ``gangweb_bench`` (``BENCH_DB_NAME``) and a role of the same name, whose password is fixed per role, are created
  when missing. Stopped again only if this run started it.
- Redis: ``redis-server`` on a free port, no persistence; `restart_redis` kills it and starts it again on that port.
- A private PostgreSQL (`start_private_postgres`, for fault runs that stop it): ``initdb`` in a temporary directory,
  ``pg_ctl`` on a free port, trust authentication on 127.0.0.1 only, removed on ``close()``.
- gunicorn: ``gangweb.wsgi`` with 2 workers on a free port, settings ``bench.settings``.
- Celery worker: ``celery -A gangweb worker`` (concurrency 2), started on demand; Celery beat and
  ``manage.py watch_clusters`` likewise (`start_beat`, `start_watch`).
- The local control plane (``localcluster``), started on demand in a state directory of its own.

Debian packages (``postgresql``, ``redis-server``) are installed with apt-get when missing and we are root.
Every process started here is stopped by its pid on ``Stack.close()``.
"""
from __future__ import annotations

import hashlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from localcluster.processes import free_port, rss_bytes

REPO = Path(__file__).resolve().parent.parent
DB_NAME = os.environ.get("BENCH_DB_NAME", "gangweb_bench")  # distinct per engineer on a shared machine
# A role per database, with a password derived from its name: a run that set a fresh random password on a role
# shared by every engineer's database failed the new connections of every other run going on at that moment
# (HTTP 500s mid-benchmark, "password authentication failed" in the PostgreSQL log). Local bench data only.
DB_USER = DB_NAME


# charts/gangweb/templates/web.yaml with values.yaml's defaults (web.gunicornWorkers 2, web.gunicornThreads 16,
# web.waitsPerUser 4, database.connMaxAge 60, config.logLevel INFO).
CHART_GUNICORN_ARGS = ["--workers", "2", "--worker-class", "gthread", "--threads", "16", "--worker-tmp-dir", "/tmp",
                       "--graceful-timeout", "30"]
CHART_WEB_ENV = {"GANGWEB_WAITS_PER_PROCESS": "8", "GANGWEB_WAITS_PER_USER": "4", "DATABASE_CONN_MAX_AGE": "60",
                 "LOG_LEVEL": "INFO", "SECURE_COOKIES": "0"}


def db_password(role: str) -> str:
    """The bench role's password: fixed per role name (a local database of benchmark data only)."""
    return hashlib.sha256(f"gangweb-bench-only:{role}".encode()).hexdigest()[:24]


def log(message: str) -> None:
    """Progress line on stderr (stdout carries the figures)."""
    print(f"[bench {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


class _Exited(RuntimeError):
    """A process being waited for has exited: `wait_for` stops polling at once."""


def wait_for(check, timeout: float, what: str, interval: float = 0.2) -> None:
    """Poll `check()` until truthy; raise RuntimeError naming `what` after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if check():
                return
        except _Exited:
            raise
        except Exception:  # noqa: BLE001 - not up yet; any error means "poll again"
            pass
        time.sleep(interval)
    raise RuntimeError(f"{what} did not come up within {timeout:.0f} s")


def _answers(url: str) -> bool:
    """True when an HTTP server answers at `url` with any status (401/403 included)."""
    try:
        urllib.request.urlopen(url, timeout=2)  # noqa: S310 - a local URL we built
    except urllib.error.HTTPError:
        return True
    return True


def apt_install(*packages: str) -> None:
    """Install Debian packages (waits up to 10 min for another apt to release its lock). Requires root."""
    if os.geteuid() != 0:
        raise RuntimeError(f"please install: sudo apt-get install {' '.join(packages)}")
    log(f"installing {' '.join(packages)} with apt-get")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    lock = ["-o", "DPkg::Lock::Timeout=600"]
    subprocess.run(["apt-get", *lock, "update", "-qq"], check=True, env=env, stdout=subprocess.DEVNULL)
    subprocess.run(["apt-get", *lock, "install", "-y", "-qq", *packages], check=True, env=env,
                   stdout=subprocess.DEVNULL)


def children(pid: int) -> list[int]:
    """Direct children of a process (from /proc/<pid>/task/*/children)."""
    kids = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            kids += [int(k) for k in (task / "children").read_text().split()]
        except FileNotFoundError:
            continue
    return kids


@dataclass
class Stack:
    """The services of one benchmark run. Use as a context manager; `close()` stops what it started."""

    workdir: Path
    env: dict[str, str] = field(default_factory=dict)
    procs: dict[str, subprocess.Popen] = field(default_factory=dict)
    pg_started: tuple[str, str] | None = None
    cluster: object | None = None
    cluster_state_dir: Path | None = None
    web_port: int = 0
    redis_port: int = 0
    private_pg: dict | None = None  # {"bindir", "root", "data", "port"} of start_private_postgres

    def __enter__(self) -> Stack:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # PostgreSQL -----------------------------------------------------------------------------------------------
    def start_postgres(self) -> str:
        """Make sure a PostgreSQL cluster runs and the bench database exists; return its DATABASE_URL."""
        if not shutil.which("pg_lsclusters"):
            apt_install("postgresql")
        clusters = [line.split() for line in subprocess.run(
            ["pg_lsclusters", "--no-header"], capture_output=True, text=True, check=True).stdout.splitlines()]
        if not clusters:
            raise RuntimeError("no PostgreSQL cluster (pg_createcluster 15 main)")
        version, name, port, status = clusters[0][:4]
        if status != "online":
            log(f"starting PostgreSQL {version}/{name} with pg_ctlcluster")
            subprocess.run(["pg_ctlcluster", version, name, "start"], check=True)
            self.pg_started = (version, name)
        # A database made before roles were per database keeps its owner (its tables are that role's).
        user = self._psql(port, "SELECT pg_get_userbyid(datdba) FROM pg_database "
                                f"WHERE datname='{DB_NAME}'").strip() or DB_USER
        password = db_password(user)
        # The same password every run: nothing to remember, and a concurrent run keeps connecting.
        sql = (f"DO $$BEGIN IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname='{user}') THEN "
               f"CREATE ROLE {user} LOGIN; END IF; END$$; ALTER ROLE {user} PASSWORD '{password}' CREATEDB;")
        self._psql(port, sql)
        if user == DB_USER and not self._psql(port, f"SELECT 1 FROM pg_database WHERE datname='{DB_NAME}'").strip():
            self._psql(port, f"CREATE DATABASE {DB_NAME} OWNER {DB_USER}")
        return f"postgres://{user}:{password}@127.0.0.1:{port}/{DB_NAME}"

    @staticmethod
    def _psql(port: str, sql: str) -> str:
        return subprocess.run(["runuser", "-u", "postgres", "--", "psql", "-p", port, "-tAq", "-c", sql],
                              capture_output=True, text=True, check=True, cwd="/").stdout

    # A private PostgreSQL (fault runs stop and restart it) ----------------------------------------------------
    def start_private_postgres(self) -> str:
        """initdb a new PostgreSQL in a temporary directory and start it on a free port of 127.0.0.1 (trust
        authentication, fsync off: test data only); return its DATABASE_URL (role and database ``gangweb``).
        As root the server runs as the ``postgres`` user (PostgreSQL refuses root)."""
        bindir = _pg_bindir()
        root = Path(tempfile.mkdtemp(prefix="gangweb-pg-"))
        if os.geteuid() == 0:
            shutil.chown(root, "postgres", "postgres")
        self.private_pg = {"bindir": bindir, "root": root, "data": root / "data", "port": free_port()}
        self._pg(["initdb", "-D", str(root / "data"), "-U", "gangweb", "-A", "trust", "-E", "UTF8", "--no-sync"])
        self.start_postgres_again()
        self._pg(["createdb", "-h", "127.0.0.1", "-p", str(self.private_pg["port"]), "-U", "gangweb", "gangweb"])
        return f"postgres://gangweb@127.0.0.1:{self.private_pg['port']}/gangweb"

    def stop_postgres(self, mode: str = "fast") -> None:
        """Stop the private PostgreSQL (`pg_ctl stop -m mode`: fast disconnects every client at once)."""
        self._pg(["pg_ctl", "-D", str(self.private_pg["data"]), "-m", mode, "-w", "stop"])

    def start_postgres_again(self) -> None:
        """Start the private PostgreSQL on its port (after `stop_postgres`); returns once it accepts connections."""
        pg = self.private_pg
        options = (f"-p {pg['port']} -k {pg['root']} -c listen_addresses=127.0.0.1 -c fsync=off "
                   "-c synchronous_commit=off -c full_page_writes=off -c max_connections=200")
        self._pg(["pg_ctl", "-D", str(pg["data"]), "-l", str(pg["root"] / "postgres.log"), "-o", options, "-w",
                  "start"])

    def _pg(self, argv: list[str]) -> None:
        run_as = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
        argv = [str(Path(self.private_pg["bindir"]) / argv[0]), *argv[1:]]
        subprocess.run([*run_as, *argv], check=True, cwd="/", stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)

    # Redis ----------------------------------------------------------------------------------------------------
    def start_redis(self) -> str:
        """Start redis-server on a free port (the same port again after `restart_redis`) without persistence;
        return its REDIS_URL."""
        if not shutil.which("redis-server"):
            apt_install("redis-server")
        port = self.redis_port = self.redis_port or free_port()
        self._spawn("redis", ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                              "--appendonly", "no", "--dir", str(self.workdir)])
        wait_for(lambda: socket.create_connection(("127.0.0.1", port), timeout=1).close() or True, 30, "redis")
        return f"redis://127.0.0.1:{port}/0"

    def restart_redis(self, down_seconds: float = 0) -> None:
        """kill -9 Redis (no persistence: every queued message is lost, as after a crash without AOF), wait
        `down_seconds`, start it again on the same port."""
        self.kill("redis", signal.SIGKILL)
        time.sleep(down_seconds)
        self.start_redis()

    # Django processes -----------------------------------------------------------------------------------------
    def start_web(self, workers: int = 2) -> str:
        """Start gunicorn (gangweb.wsgi, `workers` sync workers) on a free port; return its base URL."""
        self.web_port = free_port()
        self._spawn("web", [sys.executable, "-m", "gunicorn", "gangweb.wsgi", "--workers", str(workers),
                            "--bind", f"127.0.0.1:{self.web_port}", "--log-level",
                            "warning", "--backlog", "256"])
        base = f"http://127.0.0.1:{self.web_port}"
        self.wait_for_process("web", lambda: _answers(f"{base}/api/v1/"), "gunicorn")
        return base

    def start_chart_web(self, name: str = "web-chart", port: int = 0) -> str:
        """Start gunicorn as the Helm chart's web Deployment runs it (charts/gangweb/templates/web.yaml with the
        default values: 2 gthread workers of 16 threads, heartbeat files in /tmp, 30-s graceful timeout; the
        chart's environment: GANGWEB_WAITS_PER_PROCESS half the threads, GANGWEB_WAITS_PER_USER 4,
        DATABASE_CONN_MAX_AGE 60, LOG_LEVEL INFO) as process `name` on `port` (a free one when 0); return its base
        URL. Plain HTTP on loopback, so cookies are not marked Secure (the chart's SECURE_COOKIES is for TLS)."""
        port = port or free_port()
        saved = dict(self.env)
        self.env = {**saved, **CHART_WEB_ENV}
        try:
            # The control socket in this run's directory: its default path is one per machine user, and other
            # engineers' gunicorns on this machine use it too (a stopped server removes it).
            self._spawn(name, [sys.executable, "-m", "gunicorn", "gangweb.wsgi", "--bind", f"127.0.0.1:{port}",
                               *CHART_GUNICORN_ARGS, "--control-socket", str(self.workdir / f"{name}.ctl")])
        finally:
            self.env = saved
        base = f"http://127.0.0.1:{port}"
        self.wait_for_process(name, lambda: _answers(f"{base}/api/v1/"), "gunicorn (chart)")
        return base

    def wait_for_process(self, name: str, check, what: str, timeout: float = 180) -> None:
        """Wait until `check()` is truthy while started process `name` runs: RuntimeError (with its log's tail)
        at once if it exits, or after `timeout` s. A loaded 2-core machine needs 60-120 s to import Django in two
        gunicorn workers (fault runs at load 20-25), so the bound is the control plane's readiness bound."""
        proc = self.procs[name]

        def ready():
            if proc.poll() is not None:
                tail = (self.workdir / f"{name}.log").read_text(errors="replace")[-2000:]
                raise _Exited(f"{what} exited with {proc.returncode} before it was ready:\n{tail}")
            return check()

        wait_for(ready, timeout, what, interval=0.5)

    def start_worker(self, concurrency: int = 2, name: str = "worker", loglevel: str = "WARNING",
                     queues: str = "celery") -> None:
        """Start a Celery worker for the gangweb app (process `name`, `concurrency` pool processes) consuming
        `queues` (comma-separated: "celery" is reconcile's, "webhooks" the webhook deliveries')."""
        self._spawn(name, [sys.executable, "-m", "celery", "-A", "gangweb", "worker", f"--loglevel={loglevel}",
                           f"--concurrency={concurrency}", "-Q", queues, "--without-gossip", "--without-mingle",
                           "--without-heartbeat", "-n", f"bench-{name}-{os.getpid()}-{time.monotonic_ns()}@%h"])

    def start_beat(self, name: str = "beat") -> None:
        """Start Celery beat (the periodic resync, probe and queue sync) as process `name`, its schedule file in the
        workdir. Several may run: one sends, under the beat lease (scheduling/work/beat.py)."""
        suffix = "" if name == "beat" else f"-{name}"
        self._spawn(name, [sys.executable, "-m", "celery", "-A", "gangweb", "beat", "--loglevel=INFO",
                           f"--schedule={self.workdir / f'celerybeat-schedule{suffix}'}"])

    def start_watch(self, name: str = "watch") -> None:
        """Start `manage.py watch_clusters` (the list-then-watch of every registered cluster) as process `name`.
        Several may run: each cluster is watched by the one holding its lease (scheduling/work/election.py)."""
        self._spawn(name, [sys.executable, "manage.py", "watch_clusters"])

    def kill(self, name: str, sig: int = signal.SIGKILL) -> None:
        """Send `sig` to a started process's whole group (a Celery worker and its pool children alike) and, for
        a fatal signal, reap it; it is forgotten (start it again to replace it)."""
        proc = self.procs.pop(name, None)
        if proc is None or proc.poll() is not None:
            return
        os.killpg(proc.pid, sig)
        proc.wait(timeout=30)

    def stop(self, name: str) -> None:
        """Stop one started process (SIGTERM, then SIGKILL after 20 s) by its pid."""
        proc = self.procs.pop(name, None)
        if proc is None or proc.poll() is not None:
            return
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()

    def process_tree_rss(self, name: str) -> dict[str, int]:
        """RSS (bytes) of a started process and its children: {"master": n, "children": [..], "total": n}."""
        proc = self.procs[name]
        kids = [rss_bytes(k) for k in children(proc.pid)]
        master = rss_bytes(proc.pid)
        return {"master": master, "children": kids, "total": master + sum(kids)}

    def _spawn(self, name: str, argv: list[str]) -> subprocess.Popen:
        logfile = open(self.workdir / f"{name}.log", "ab")  # noqa: SIM115 - closed with the process
        proc = subprocess.Popen(argv, cwd=REPO, env={**os.environ, **self.env}, stdout=logfile,
                                stderr=subprocess.STDOUT, start_new_session=True)
        self.procs[name] = proc
        return proc

    # Local control plane ---------------------------------------------------------------------------------------
    def start_cluster(self):
        """Start the local Kubernetes control plane (localcluster) in a state dir of this run; return it."""
        import localcluster

        self.cluster_state_dir = self.workdir / "localcluster"
        log("starting the local control plane")
        self.cluster = localcluster.up(localcluster.ClusterConfig(state_dir=self.cluster_state_dir))
        return self.cluster

    def restart_cluster(self):
        """Stop the local control plane (if one runs) and start a fresh one in a new state dir; return it. A fresh
        cluster starts in ~15 s, where deleting an earlier benchmark's namespaces (2,000 Jobs, 4,000 pods) takes
        the Job and namespace controllers 2 minutes or more."""
        import localcluster

        old = self.cluster_state_dir
        if old is not None:
            log("stopping the local control plane for a fresh one")
            localcluster.down(old)
        self.cluster_state_dir = self.workdir / f"localcluster-{time.monotonic_ns()}"
        log("starting the local control plane")
        self.cluster = localcluster.up(localcluster.ClusterConfig(state_dir=self.cluster_state_dir))
        return self.cluster

    def close(self) -> None:
        """Stop everything this stack started, newest first."""
        for name in reversed(list(self.procs)):
            self.stop(name)
        if self.cluster_state_dir is not None:
            import localcluster

            try:
                localcluster.down(self.cluster_state_dir)
            except Exception as exc:  # noqa: BLE001 - keep stopping the rest
                log(f"stopping the local control plane failed: {exc}")
        if self.pg_started:
            self._stop_postgres()
        if self.private_pg is not None:
            try:
                self.stop_postgres("immediate")
            except subprocess.CalledProcessError:
                pass  # already stopped
            shutil.rmtree(self.private_pg["root"], ignore_errors=True)
            self.private_pg = None

    def _stop_postgres(self) -> None:
        """Stop the PostgreSQL cluster this run started, unless someone else connected to it meanwhile."""
        version, name = self.pg_started
        port = next((line.split()[2] for line in subprocess.run(
            ["pg_lsclusters", "--no-header"], capture_output=True, text=True).stdout.splitlines()
            if line.split()[:2] == [version, name]), "5432")
        try:
            others = self._psql(port, "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend' "
                                      f"AND pid <> pg_backend_pid() AND datname IS DISTINCT FROM '{DB_NAME}'")
        except subprocess.CalledProcessError:
            others = "0"
        if others.strip() not in ("", "0"):
            log(f"leaving PostgreSQL {version}/{name} running: {others.strip()} other client(s) connected")
            return
        log(f"stopping PostgreSQL {version}/{name} (this run started it)")
        subprocess.run(["pg_ctlcluster", version, name, "stop"], check=False)


def _pg_bindir() -> str:
    """The newest installed PostgreSQL's bin directory (Debian: /usr/lib/postgresql/<major>/bin)."""
    found = sorted(Path("/usr/lib/postgresql").glob("*/bin/initdb"), key=lambda p: int(p.parent.parent.name))
    if not found:
        apt_install("postgresql")
        found = sorted(Path("/usr/lib/postgresql").glob("*/bin/initdb"), key=lambda p: int(p.parent.parent.name))
    return str(found[-1].parent)
