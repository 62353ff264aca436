"""The whole of gangweb on this machine, for fault runs (tests/faults/) and the soak (bench/soak.py).

`FaultStack` is a `bench.stack.Stack` with everything private to the run, so a run may kill, stop and restart
any of it without touching what other runs use: PostgreSQL (initdb in a temporary directory), Redis, the local
control plane, gunicorn, a Celery worker, Celery beat and `manage.py watch_clusters`, all on free ports and
configured like production (`gangweb.settings`, DEBUG off, Redis cache and broker, submit rate limits on with
rates no run reaches). `seed` registers the control plane as cluster "local" with queue "default", 2-pod
k8s-workload templates (TEMPLATES) and an admin API token.

`Client` is a pipeline's view of the API: it submits with an Idempotency-Key and retries the same request on a
503, a refused connection or a timeout, as a well-behaved client does; it keeps every 201.

`census` counts, at the end of a run, jobs by phase and the objects each job has in the cluster, and names every
way the two disagree (`Census.problems`): a live job without exactly one set of gang objects, owner Jobs and
Service; a finished job whose gang objects or Service are still there, or that is not marked cleaned up; a
cancelled job with anything left, pods included; objects of no job (orphans); a 201 whose job is missing; a job
nobody accepted (created twice).
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field

from .stack import REPO, Stack, log, wait_for

# Templates by how long their pods run (kwok's gangweb.io/sim-duration): short jobs finish mid-run, long ones stay.
TEMPLATES = {"fault-short": "15s", "fault-long": "3600s"}
LIVE_POD_PHASES = ("Pending", "Running", "Unknown")
TERMINAL = ("Succeeded", "Failed", "Cancelled")


def template_spec(sim_duration: str, replicas: int = 2) -> dict:
    """A k8s-workload gang of `replicas` small pods that run `sim_duration` once started."""
    return {
        "backend": "k8s-workload",
        "gang": {"scheduleTimeoutSeconds": 60},
        "podSets": [{"name": "worker", "replicas": replicas, "template": {
            "metadata": {"annotations": {"gangweb.io/sim-duration": sim_duration}},
            "spec": {"containers": [{"name": "main", "image": "registry.example/train:1",
                                     "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}}}]}}}],
        "overridable": ["podSets.*.replicas"],
    }


class FaultStack(Stack):
    """Every service of gangweb, private to one run. `start()` brings it all up; `close()` stops it all."""

    token: str = ""
    password: str = ""
    base_url: str = ""

    def start(self, *, worker_concurrency: int = 2, resync_seconds: int = 5, kubeconfig: str | None = None,
              workers: int = 1, watch: bool = True, beat: bool = True) -> FaultStack:
        """Start PostgreSQL, Redis, migrate, the control plane (or use `kubeconfig`), seed, then gunicorn,
        `workers` Celery workers of `worker_concurrency` processes, beat (resync every `resync_seconds`) and the
        watcher. Returns self."""
        self.configure(resync_seconds)
        self.env["DATABASE_URL"] = self.start_private_postgres()
        self.env["REDIS_URL"] = self.start_redis()
        self.manage("migrate", "--noinput")
        if kubeconfig is None:
            kubeconfig = str(self.start_cluster().kubeconfig)
        self.kubeconfig = kubeconfig
        seeded = json.loads(self.manage_output([sys.executable, "-m", "bench.faultstack", "seed", kubeconfig]))
        self.token, self.password = seeded["token"], seeded["password"]
        self.start_services(worker_concurrency, workers, watch, beat)
        return self

    def configure(self, resync_seconds: int) -> None:
        """The environment of every process of the stack: production settings (DEBUG off), fresh secrets, a state
        directory in the workdir, resync every `resync_seconds`, submit rate limits no run reaches, loopback
        clusters allowed."""
        from cryptography.fernet import Fernet

        state = self.workdir / "state"
        state.mkdir(parents=True, exist_ok=True)
        self.env.update({
            "DJANGO_SETTINGS_MODULE": "gangweb.settings", "GANGWEB_TESTING": "0", "DEBUG": "0",
            "SECRET_KEY": uuid.uuid4().hex * 2, "GANGWEB_ENCRYPTION_KEYS": Fernet.generate_key().decode(),
            "GANGWEB_STATE_DIR": str(state), "ALLOWED_HOSTS": "127.0.0.1,localhost",
            "GANGWEB_RESYNC_SECONDS": str(resync_seconds), "GANGWEB_SUBMIT_RATE_PER_TOKEN": "100000/minute",
            "GANGWEB_SUBMIT_RATE_PER_USER": "100000/minute", "LOG_LEVEL": "INFO", "PYTHONUNBUFFERED": "1",
            # The local control plane listens on loopback, which production installs refuse (docs/security.md).
            "GANGWEB_ALLOW_PRIVATE_CLUSTER_ADDRESSES": "127.0.0.0/8,::1/128",
        })

    def start_services(self, worker_concurrency: int = 2, workers: int = 1, watch: bool = True,
                       beat: bool = True) -> None:
        """gunicorn, `workers` Celery workers of `worker_concurrency` processes, beat and the watcher (once the
        database is migrated and seeded)."""
        self.base_url = self.start_web()
        for i in range(workers):  # 0: no worker (a run that only watches)
            self.start_worker(worker_concurrency, name=f"worker{i}" if i else "worker", loglevel="INFO")
        if beat:
            self.start_beat()
        if watch:
            self.start_watch()

    def allow_namespace(self, name: str) -> None:
        """Let queue "default" run jobs in namespace `name` (a queue allows only the namespaces it lists)."""
        self.manage_output([sys.executable, "-m", "bench.faultstack", "allow-namespace", name])

    def manage(self, *args: str) -> None:
        """Run `manage.py <args>` against the stack's database (raises on failure)."""
        self.manage_output([sys.executable, "manage.py", *args])

    def manage_output(self, argv: list[str]) -> str:
        """Run `argv` in the repository with the stack's environment; its stdout (raises with stderr on failure)."""
        done = subprocess.run(argv, cwd=REPO, env={**os.environ, **self.env}, capture_output=True, text=True)
        if done.returncode:
            raise RuntimeError(f"{' '.join(argv[-3:])} failed: {done.stderr[-3000:]}")
        return done.stdout.strip().splitlines()[-1] if done.stdout.strip() else ""

    def browser(self):
        """A requests.Session logged in to the dashboard as the admin (session cookie, CSRF token)."""
        import requests

        session = requests.Session()
        session.get(f"{self.base_url}/accounts/login/", timeout=30)
        r = session.post(f"{self.base_url}/accounts/login/", timeout=30, allow_redirects=False, data={
            "username": "faults", "password": self.password, "csrfmiddlewaretoken": session.cookies["csrftoken"]})
        assert r.status_code == 302, (r.status_code, r.text[:300])
        return session

    def apiserver_pid(self) -> int:
        """PID of the local control plane's kube-apiserver."""
        return next(p.pid for p in self.cluster.state.processes if p.name == "kube-apiserver")

    def pause_apiserver(self, seconds: float) -> None:
        """SIGSTOP the kube-apiserver for `seconds`, then SIGCONT: connections stay open and hang, as on a
        stalled server (not a refused connection)."""
        pid = self.apiserver_pid()
        os.kill(pid, signal.SIGSTOP)
        try:
            time.sleep(seconds)
        finally:
            os.kill(pid, signal.SIGCONT)

    def kill_apiserver(self) -> None:
        """kill -9 of the control plane's kube-apiserver (its session: nothing of it stays); `start_apiserver_again`
        starts it with the same command line."""
        from localcluster.processes import is_running

        pid = self.apiserver_pid()
        try:
            os.killpg(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        record = next(p for p in self.cluster.state.processes if p.name == "kube-apiserver")
        wait_for(lambda: not is_running(record), 30, "kube-apiserver gone")

    def start_apiserver_again(self) -> None:
        """Start kube-apiserver with the command line it had (its etcd kept everything) and wait until it answers;
        the cluster's state file names the new process, so `close()` stops it."""
        from pathlib import Path

        from kubernetes import client as k8s

        from localcluster.processes import spawn

        state = self.cluster.state
        old = next(p for p in state.processes if p.name == "kube-apiserver")
        _popen, record = spawn("kube-apiserver", old.argv, Path(old.log))
        state.processes[state.processes.index(old)] = record
        state.save()

        def answers() -> bool:
            try:
                k8s.CoreV1Api(self.cluster.api_client()).list_namespace(limit=1, _request_timeout=5)
                return True
            except Exception:  # noqa: BLE001 - not up yet
                return False

        wait_for(answers, 180, "kube-apiserver answering again")

    def alive(self, name: str) -> bool:
        """True while the started process `name` runs."""
        proc = self.procs.get(name)
        return proc is not None and proc.poll() is None

    def log_text(self, name: str) -> str:
        """Everything process `name` logged so far."""
        path = self.workdir / f"{name}.log"
        return path.read_text(errors="replace") if path.exists() else ""


def seed(kubeconfig: str) -> dict:
    """(In the stack's environment.) Register the control plane as cluster "local" (queue "default"), create
    the fault templates (TEMPLATES) and an admin ("faults") with a read/submit/cancel API token. Returns
    {"token", "password"}."""
    import django

    django.setup()
    from django.contrib.auth import get_user_model

    from scheduling.services.access import tokens
    from scheduling.services.clusters import local as local_cluster
    from scheduling.services.templates import versions as template_versions

    local_cluster.register(kubeconfig)
    password = uuid.uuid4().hex
    user = get_user_model().objects.create_superuser("faults", "faults@example.com", password)
    for name, duration in TEMPLATES.items():
        template_versions.create_template(user, name, f"fault runs: 2 small pods for {duration}",
                                         template_spec(duration))
    _, plaintext = tokens.create(user, {"name": "faults", "actions": ["read", "submit", "cancel"]})
    return {"token": plaintext, "password": password}


@dataclass
class Client:
    """A pipeline talking to the API with a token: submits carry an Idempotency-Key and are retried unchanged
    on 503 / connection errors / timeouts until `retry_seconds` pass. `accepted` maps key -> job (the 201s),
    `answers` counts every status code seen (connection errors as 0), `unavailable` keeps the 503 answers."""

    base_url: str
    token: str
    retry_seconds: float = 120
    accepted: dict[str, dict] = field(default_factory=dict)
    answers: Counter = field(default_factory=Counter)
    unavailable: list[dict] = field(default_factory=list)

    def __post_init__(self):
        import requests

        self.http = requests.Session()
        self.http.headers["Authorization"] = f"Bearer {self.token}"

    def request(self, method: str, path: str, **kwargs):
        """One request, retried on 503, connection errors and timeouts (same body and headers each time)."""
        import requests

        deadline = time.monotonic() + self.retry_seconds
        while True:
            try:
                r = self.http.request(method, self.base_url + path, timeout=30, **kwargs)
            except (requests.ConnectionError, requests.Timeout):
                self.answers[0] += 1
                if time.monotonic() > deadline:
                    raise
                time.sleep(1)
                continue
            self.answers[r.status_code] += 1
            if r.status_code == 503:
                self.unavailable.append({"content_type": r.headers.get("Content-Type", ""),
                                         "retry_after": r.headers.get("Retry-After"), "body": r.text[:500]})
                if time.monotonic() > deadline:
                    return r
                time.sleep(min(float(r.headers.get("Retry-After") or 1), 2))
                continue
            return r

    def submit(self, name: str, namespace: str, template: str = "fault-short", key: str | None = None) -> dict:
        """Submit one job (queue "default", cluster "local"); returns the 201's body. Raises AssertionError on
        any other final answer."""
        key = key or uuid.uuid4().hex
        body = {"name": name, "namespace": namespace, "template": template, "queue": "default", "cluster": "local"}
        r = self.request("POST", "/api/v1/jobs/", json=body, headers={"Idempotency-Key": key})
        assert r.status_code == 201, (r.status_code, r.text[:500])
        job = r.json()
        if key in self.accepted:
            assert self.accepted[key]["uid"] == job["uid"], "one Idempotency-Key answered with two jobs"
        self.accepted[key] = job
        return job

    def bulk(self, names: list[str], namespace: str, template: str = "fault-short", key: str | None = None) -> list:
        """Submit jobs in one bulk request (one reconcile batch); returns their 201 bodies."""
        key = key or uuid.uuid4().hex
        items = [{"name": n, "namespace": namespace, "template": template, "queue": "default", "cluster": "local"}
                 for n in names]
        r = self.request("POST", "/api/v1/jobs/bulk/", json={"jobs": items}, headers={"Idempotency-Key": key})
        assert r.status_code == 201, (r.status_code, r.text[:500])
        jobs = r.json()["jobs"]
        for i, job in enumerate(jobs):
            self.accepted[f"{key}/{i}"] = job
        return jobs

    def cancel(self, job_id: int) -> dict:
        """Cancel a job (202)."""
        r = self.request("POST", f"/api/v1/jobs/{job_id}/cancel/")
        assert r.status_code == 202, (r.status_code, r.text[:500])
        return r.json()

    def job(self, job_id: int) -> dict:
        """One job as the API shows it."""
        r = self.request("GET", f"/api/v1/jobs/{job_id}/")
        assert r.status_code == 200, (r.status_code, r.text[:500])
        return r.json()

    def jobs(self, namespace: str | None = None) -> list[dict]:
        """Every job (of `namespace`), following the pagination."""
        out, offset = [], 0
        while True:
            params = {"limit": 500, "offset": offset, **({"namespace": namespace} if namespace else {})}
            r = self.request("GET", "/api/v1/jobs/", params=params)
            assert r.status_code == 200, (r.status_code, r.text[:500])
            page = r.json()
            out += page["results"]
            if not page.get("next"):
                return out
            offset += len(page["results"])


@dataclass
class Census:
    """Jobs by phase and what of them is in the cluster; `problems` lists every disagreement (empty: sound)."""

    phases: Counter
    objects: dict[str, Counter]  # job uid -> Counter of "Workload", "PodGroup", "Job", "Service", "live pods", "pods"
    orphans: list[str]
    problems: list[str]

    def summary(self) -> str:
        """One line: jobs by phase, objects in total, orphans, problems."""
        total = Counter()
        for counts in self.objects.values():
            total.update(counts)
        return (f"jobs by phase {dict(sorted(self.phases.items()))}; objects {dict(sorted(total.items()))}; "
                f"orphans {len(self.orphans)}; problems {len(self.problems)}")


def client_django() -> None:
    """Configure Django in a bench's client process when it is not: gangweb's LIST helpers read their page size
    from its settings. The process signs, stores and serves nothing, so it runs with DEBUG's development keys."""
    import django
    from django.conf import settings

    if not settings.configured:
        os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gangweb.settings")
        os.environ.setdefault("DEBUG", "1")
        django.setup()


def cluster_objects(api, namespace: str | None = None, gang_only: bool = False) -> dict[str, Counter]:
    """{job uid: Counter of its objects by kind} of every gangweb-labelled object (of `namespace`, else all):
    gang kinds of the k8s-workload backend, Jobs, Services, pods (and "live pods": Pending/Running/Unknown);
    `gang_only`: the gang kinds and Services alone (no LIST of Jobs or pods). Configures Django in the calling
    process when it is not (`client_django`)."""
    client_django()
    from scheduling.backends import discovery, registry
    from scheduling.constants import LABEL_INSTANCE, LABEL_JOB_UID
    from scheduling.kube import objects
    from scheduling.kube.objects import JOB, POD, SERVICE

    selector = f"{LABEL_INSTANCE}=gangweb"
    # The version the worker's discovery picks: v1beta1 on 1.37, v1alpha2 on 1.36.
    plugin = registry.select("k8s-workload", discovery.served_versions(api))
    refs = list(plugin.gang_kinds) + ([SERVICE] if gang_only else [JOB, SERVICE, POD])
    by_job: dict[str, Counter] = {}
    for ref in refs:
        for obj in objects.list_objects(api, ref, namespace, selector):
            uid = (obj["metadata"].get("labels") or {}).get(LABEL_JOB_UID, "?")
            counts = by_job.setdefault(uid, Counter())
            counts[ref.kind if ref != POD else "pods"] += 1
            if ref == POD and (obj.get("status") or {}).get("phase", "Pending") in LIVE_POD_PHASES:
                counts["live pods"] += 1
    return by_job


def pods_of(api, namespace: str, uid: str) -> list[dict]:
    """Every pod of `namespace` labelled with gangweb job `uid`, whatever its phase (one LIST by label)."""
    from scheduling.constants import LABEL_JOB_UID
    from scheduling.kube import objects
    from scheduling.kube.objects import POD

    return list(objects.list_objects(api, POD, namespace, f"{LABEL_JOB_UID}={uid}"))


def census(client: Client, api, namespace: str, gang_kinds=("Workload", "PodGroup"), owners: int = 1) -> Census:
    """Count the jobs of `namespace` by phase and their objects in the cluster; list every problem (see the
    module docstring). A live job must hold exactly one of each of `gang_kinds`, `owners` Jobs and one Service;
    a finished one none of its gang kinds or Service and no live pod, with `cleaned_up_at` set; a cancelled one
    nothing at all."""
    jobs = client.jobs(namespace)
    objs = cluster_objects(api, namespace)
    problems = []
    uids = Counter(j["uid"] for j in jobs)
    accepted = {j["uid"] for j in client.accepted.values()}
    for uid in accepted - set(uids):
        problems.append(f"job {uid} was accepted (201) but is missing")
    for uid in set(uids) - accepted:
        problems.append(f"job {uid} exists but no submit was answered with it (created twice?)")
    for uid, n in uids.items():
        if n > 1:
            problems.append(f"job {uid} listed {n} times")
    for job in jobs:
        have = objs.get(job["uid"], Counter())
        name = f"{job['name']} ({job['phase']}, {job['phase_reason']})"
        if job["phase"] == "Cancelled":
            if sum(have.values()) or not job.get("cleaned_up_at"):
                problems.append(f"{name}: cancelled but {dict(have)} left, cleaned_up_at={job.get('cleaned_up_at')}")
        elif job["phase"] in TERMINAL:
            left = {k: have[k] for k in (*gang_kinds, "Service", "live pods") if have[k]}
            if left or not job.get("cleaned_up_at"):
                problems.append(f"{name}: finished but {left} left, cleaned_up_at={job.get('cleaned_up_at')}")
        else:
            want = {**{k: 1 for k in gang_kinds}, "Job": owners, "Service": 1}
            got = {k: have[k] for k in want}
            if got != want:
                problems.append(f"{name}: live with {got}, want {want}")
    orphans = sorted(set(objs) - set(uids))
    for uid in orphans:
        problems.append(f"objects of no job {uid}: {dict(objs[uid])}")
    return Census(Counter(j["phase"] for j in jobs), objs, orphans, problems)


def settle(client: Client, api, namespace: str, timeout: float, want=lambda job: True, **kwargs) -> Census:
    """Poll `census` until it has no problems and every job satisfies `want(job)`, or `timeout` seconds pass;
    return the last census (with an extra problem naming the jobs `want` refused, when it timed out)."""
    deadline = time.monotonic() + timeout
    while True:
        result = census(client, api, namespace, **kwargs)
        waiting = [j["name"] for j in client.jobs(namespace) if not want(j)]
        if (not result.problems and not waiting) or time.monotonic() > deadline:
            if waiting:
                result.problems.append(f"still waiting on {len(waiting)} job(s): {waiting[:10]}")
            return result
        time.sleep(2)


def create_namespace(api, name: str) -> None:
    """Create a namespace in the cluster and wait for its default ServiceAccount (pods need it)."""
    from kubernetes import client

    core = client.CoreV1Api(api)
    core.create_namespace({"metadata": {"name": name}})
    wait_for(lambda: core.read_namespaced_service_account("default", name), 60, f"namespace {name}")


def allow_namespace(name: str) -> None:
    """(In the stack's environment.) Add `name` to queue "default"'s allowed namespaces."""
    import django

    django.setup()
    from scheduling.models import QueuePolicy

    queue = QueuePolicy.objects.get(name="default")
    if name not in queue.allowed_namespaces:
        queue.allowed_namespaces = [*queue.allowed_namespaces, name]
        queue.save(update_fields=["allowed_namespaces"])


if __name__ == "__main__" and sys.argv[1:2] == ["seed"]:
    print(json.dumps(seed(sys.argv[2])))
    log("seeded")
elif __name__ == "__main__" and sys.argv[1:2] == ["allow-namespace"]:
    allow_namespace(sys.argv[2])
