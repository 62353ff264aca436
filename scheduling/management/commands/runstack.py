"""Run web, Celery worker and Celery beat together for a laptop (what `make run` starts)."""
import os
import shutil
import signal
import subprocess
import sys
import time

from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand

STARTUP_SECONDS = 10  # a process that exits this soon after its first start has a setup problem: stop everything
RESTART_BACKOFF_SECONDS = (1, 2, 5, 10, 30)  # pauses before restarting a process that exited later, per exit in a row
STEADY_SECONDS = 60  # a restarted process that runs this long resets its backoff


class Command(BaseCommand):
    """`manage.py runstack [--port 8000] [--no-cluster]`: bootstrap the admin, start (and register) the local
    control plane when its binaries are built, then run web, the reconcile worker (queue "celery"), the webhook
    worker (queue settings.GANGWEB_WEBHOOK_QUEUE), beat and the cluster watcher until Ctrl-C
    stops them all. A process that exits later than STARTUP_SECONDS after its start is started again after a
    pause (RESTART_BACKOFF_SECONDS); one that exits at once stops the others (a setup problem to report)."""

    help = "Run web, the workers and beat (and the local cluster) in the foreground."

    def add_arguments(self, parser):
        parser.add_argument("--port", type=int, default=int(os.environ.get("PORT", "8000")))
        parser.add_argument("--no-cluster", action="store_true", help="do not start the local control plane")
        parser.add_argument("--logs-here", action="store_true",
                            help="the processes' output on this terminal, not in <state dir>/run.log")

    def handle(self, *args, **options):
        settings.STATE_DIR.mkdir(parents=True, exist_ok=True)
        call_command("bootstrap_admin")
        follower = None if options["no_cluster"] else self._local_cluster()
        self._metrics_dir()
        port = options["port"]
        argvs = process_argvs(port)
        env = quiet_env()
        # The processes' output (the access log, Celery's and libraries' warnings) goes to a file, so the banner
        # stays the last thing on the terminal (issue 33); --logs-here keeps it on the terminal.
        log_file = None if options["logs_here"] else open(run_log_path(), "ab", buffering=0)  # noqa: SIM115
        procs = {name: _start(name, argv, env, log_file) for name, argv in argvs.items()}
        started = {name: time.monotonic() for name in procs}
        failures: dict[str, int] = {}
        if _wait_for_port(port, procs["web"]):
            self.stdout.write(self.style.SUCCESS(banner(port, None if log_file is None else run_log_path())))
        elif procs["web"].poll() is None:
            self.stdout.write(self.style.WARNING(
                f"\nthe web server is not answering on http://127.0.0.1:{port}/ after {WEB_READY_SECONDS:.0f} s; "
                "it is still starting (a loaded machine) - try the URL again shortly. Ctrl-C stops everything.\n"))
        stop = []
        signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
        # Also when started in the background (SIGINT inherited as ignored): `kill -INT` of the group still stops it.
        signal.signal(signal.SIGINT, lambda *_: stop.append(1))
        died = []
        try:
            while not stop and not died:
                time.sleep(0.5)
                for name, proc in list(procs.items()):
                    if proc.poll() is None or stop:
                        continue
                    if time.monotonic() - started[name] < STARTUP_SECONDS and name not in failures:
                        died.append((name, proc.returncode))  # never came up: a setup problem, not an outage
                        continue
                    # Exited after running a while (a crash, a database outage it did not survive): start it again
                    # after a growing pause, as the compose file's restart policy does.
                    n = failures[name] = failures.get(name, 0) + 1
                    wait = RESTART_BACKOFF_SECONDS[min(n - 1, len(RESTART_BACKOFF_SECONDS) - 1)]
                    self.stderr.write(f"runstack: {name} exited with code {proc.returncode}; restarting it in "
                                      f"{wait} s (restart {n})")
                    time.sleep(wait)
                    procs[name], started[name] = _start(name, argvs[name], env, log_file), time.monotonic()
                for name in list(failures):
                    if time.monotonic() - started[name] > STEADY_SECONDS:
                        del failures[name]  # ran long enough again: the next exit starts the backoff anew
                if follower is not None:
                    self._follow(follower)
        except KeyboardInterrupt:
            stop.append(1)
        for p in procs.values():
            if p.poll() is None:
                p.terminate()
        for p in procs.values():
            try:
                p.wait(timeout=15)
            except subprocess.TimeoutExpired:
                p.kill()
        if died:
            # A process that exits right after its start stops the others; say which, so the run does not just
            # end in silence.
            self.stderr.write("runstack: " + ", ".join(f"{n} exited with code {rc}" for n, rc in died)
                              + " right after starting; stopped the others (see its output "
                              + ("above)." if log_file is None else f"in {run_log_path()}).")
                              + ("" if options["no_cluster"] else
                                 " The local cluster keeps running: `manage.py localcluster down` stops it."))
            sys.exit(1)

    def _metrics_dir(self):
        """Prometheus multiprocess mode: every child process writes its samples under one fresh directory and
        /metrics merges them (see scheduling.observe.metrics)."""
        path = settings.STATE_DIR / "prometheus"
        shutil.rmtree(path, ignore_errors=True)
        path.mkdir(parents=True)
        os.environ["PROMETHEUS_MULTIPROC_DIR"] = str(path)

    def _local_cluster(self):
        """Start the local control plane and register it as cluster "local" (skipped when not built). Returns a
        KubeconfigFollower of its kubeconfig (a `localcluster down` / `up` later re-registers it), or None."""
        try:
            from scheduling.services.clusters import local as local_cluster
        except ImportError:
            return None
        try:
            local_cluster.start_and_register(self.stdout)
        except Exception as exc:  # the dashboard still runs; the cluster is optional on a laptop
            self.stderr.write(f"local cluster not started: {exc}")
            return None
        return local_cluster.KubeconfigFollower(local_cluster.kubeconfig_path())

    def _follow(self, follower):
        """Re-register the local cluster if its kubeconfig changed; a failure is reported, never fatal."""
        try:
            follower.check(self.stdout)
        except Exception as exc:  # the next change tries again; web, worker and beat keep running
            self.stderr.write(f"local cluster: registering its new kubeconfig failed: {exc}")


# The background processes (workers, beat, cluster watcher) log at this level under `make run` unless LOG_LEVEL says
# otherwise: at INFO their start-up lines (Celery's banner, "ready", every task) buried the URL and login that
# `make run` prints (a new user's pass). WARNING still shows every problem; `LOG_LEVEL=INFO make run` shows all.
BACKGROUND_LOG_LEVEL = "WARNING"
BACKGROUND = ("worker", "webhooks", "beat", "watch_clusters")


def log_level() -> str:
    """The background processes' log level: LOG_LEVEL when set, else BACKGROUND_LOG_LEVEL."""
    return os.environ.get("LOG_LEVEL") or BACKGROUND_LOG_LEVEL


def quiet_env() -> dict[str, str]:
    """The environment of the background processes: LOG_LEVEL (settings.LOGGING's root level) set to `log_level`."""
    return {**os.environ, "LOG_LEVEL": log_level()}


def run_log_path():
    """Where `make run` writes its processes' output: <state dir>/run.log (appended to)."""
    return settings.STATE_DIR / "run.log"


def _start(name: str, argv: list[str], env: dict[str, str], log_file=None) -> subprocess.Popen:
    """Start one process; the background ones (BACKGROUND) with `env` (quiet_env), web with runstack's own. With
    `log_file` (an open binary file), its stdout and stderr go there instead of the terminal."""
    out = {} if log_file is None else {"stdout": log_file, "stderr": subprocess.STDOUT}
    return subprocess.Popen(argv, env=env if name in BACKGROUND else None, **out)


def process_argvs(port: int) -> dict[str, list[str]]:
    """{name: argv} of the processes runstack runs: web on 127.0.0.1:`port`, the reconcile worker (Celery's default
    queue only), the webhook worker (settings.GANGWEB_WEBHOOK_QUEUE only), beat and the cluster watcher. Celery
    runs `--quiet` (no start-up banner) at `log_level()`."""
    py = sys.executable
    celery = [py, "-m", "celery", "--quiet", "-A", "gangweb"]
    level = f"--loglevel={log_level()}"
    return {
        "web": [py, "manage.py", "runserver", f"127.0.0.1:{port}", "--noreload"],
        "worker": [*celery, "worker", level, "--concurrency=2",
                   "-Q", settings.CELERY_TASK_DEFAULT_QUEUE, "--without-gossip", "--without-mingle",
                   "-n", "gangweb-worker@%h"],
        # Webhook deliveries on a worker of their own: a slow receiver never holds a reconcile slot.
        "webhooks": [*celery, "worker", level, "--concurrency=2",
                     "-Q", settings.GANGWEB_WEBHOOK_QUEUE, "--without-gossip", "--without-mingle",
                     "-n", "gangweb-webhooks@%h"],
        "beat": [*celery, "beat", level],
        "watch_clusters": [py, "manage.py", "watch_clusters"],
    }


def banner(port: int, log_path=None) -> str:
    """What `make run` prints once the web server answers, last: the URL, the user and password to log in with
    (the password from <state dir>/admin-password, where bootstrap_admin keeps a generated one), where the
    processes' output goes (`log_path`, None: this terminal), how to stop."""
    username = os.environ.get("GANGWEB_ADMIN_USER", "admin")
    password_file = settings.STATE_DIR / "admin-password"
    try:
        password = password_file.read_text().strip()
    except OSError:
        password = ""
    login = (f"user '{username}', password '{password}' (kept in {password_file})" if password else
             f"user '{username}' with the password you set (GANGWEB_ADMIN_PASSWORD)")
    return (f"\n{'=' * 72}\ngangweb is running: http://127.0.0.1:{port}/  (API: /api/v1/, docs: /api/docs/)\n"
            f"Log in as {login}.\n"
            f"Workers, beat and the cluster watcher log at {log_level()} (LOG_LEVEL=INFO make run shows more)"
            + (f";\nall output (the access log included) goes to {log_path} (tail -f it).\n" if log_path else ".\n")
            + f"Ctrl-C stops web, workers, beat and the cluster watcher.\n{'=' * 72}\n")


WEB_READY_SECONDS = 300.0  # runserver's first start imports everything: over 60 s on a loaded 2-core machine


def _wait_for_port(port: int, web: subprocess.Popen, timeout: float = WEB_READY_SECONDS) -> bool:
    """True once 127.0.0.1:`port` accepts connections; False when the web process died or `timeout` seconds
    passed first. The "running" line is printed only on True."""
    import socket

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and web.poll() is None:
        with socket.socket() as s:
            s.settimeout(0.5)
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return True
        time.sleep(0.25)
    return False

