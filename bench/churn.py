"""Pod churn for the watch benchmark: container restarts written as pod status updates, at a fixed rate.

    python -m bench.churn <config.json>

Config (JSON): ``{"kubeconfig": path, "pods": [[namespace, name, container, image], ...], "rate": updates per second,
"threads": n, "seconds": how long}``. Runs in a process of its own, so its requests do not compete with the
benchmark's measuring threads for one interpreter lock.

Each update is one ``PATCH /api/v1/namespaces/<ns>/pods/<name>/status`` (JSON merge patch) that flips the pod's one
container between crash-looping and running, as a kubelet reports a container that keeps failing: ``state.waiting``
``CrashLoopBackOff`` with ``lastState.terminated`` (exit code 1) and ``restartCount`` one higher, then
``state.running`` again. The pod's phase and conditions stay (Running, Ready), so neither the Job controller nor
kwok writes anything back; every update is one pod MODIFIED event for each watcher, and one that changes what
gangweb's API shows of the pod (its row's ``reason``: "CrashLoopBackOff" or empty).

Threads own disjoint slices of the pods (so one pod's updates never race) and each paces itself at
``rate / threads`` updates per second; a thread that falls more than a second behind drops the backlog instead of
bursting. On exit it prints one JSON line: ``{"sent", "ok", "errors": {status: n}, "first_error", "seconds",
"rate", "latency_p50_ms", "latency_p99_ms"}``.
"""
from __future__ import annotations

import json
import sys
import threading
import time
from datetime import UTC, datetime

CRASH_REASON = "CrashLoopBackOff"


def now_rfc3339() -> str:
    """The current time as Kubernetes writes it (seconds, UTC, "Z")."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def status_patch(container: str, image: str, restarts: int, crashed: bool) -> dict:
    """The merge patch body of one update: the container crash-looping (`crashed`) or running again, after
    `restarts` restarts. Replaces `status.containerStatuses` (a merge patch replaces lists whole)."""
    at = now_rfc3339()
    last = {"terminated": {"exitCode": 1, "reason": "Error", "startedAt": at, "finishedAt": at}} if restarts else {}
    if crashed:
        state = {"waiting": {"reason": CRASH_REASON,
                             "message": f"back-off 10s restarting failed container={container}"}}
    else:
        state = {"running": {"startedAt": at}}
    return {"status": {"containerStatuses": [{
        "name": container, "image": image, "imageID": "", "ready": not crashed, "started": not crashed,
        "restartCount": restarts, "state": state, "lastState": last}]}}


class Patcher:
    """PATCHes pod status through one kubernetes-client connection pool (its TLS and auth from the kubeconfig)."""

    def __init__(self, kubeconfig: str, connections: int):
        from kubernetes import client, config

        cfg = client.Configuration()
        config.load_kube_config(config_file=kubeconfig, client_configuration=cfg)
        cfg.connection_pool_maxsize = connections
        self.api = client.ApiClient(cfg)
        self.host = cfg.host.rstrip("/")
        self.headers = {"Content-Type": "application/merge-patch+json", "Accept": "application/json"}
        token = cfg.get_api_key_with_prefix("BearerToken", alias="authorization")
        if token:
            self.headers["Authorization"] = token

    def patch(self, namespace: str, name: str, body: dict) -> tuple[int, str]:
        """(HTTP status, body text when not 200) of one status PATCH."""
        import urllib3

        pool = self.api.rest_client.pool_manager
        response = pool.request("PATCH", f"{self.host}/api/v1/namespaces/{namespace}/pods/{name}/status",
                                body=json.dumps(body).encode(), headers=self.headers, preload_content=True,
                                timeout=urllib3.Timeout(connect=5, read=30), retries=False)
        return response.status, "" if response.status == 200 else response.data.decode(errors="replace")[:500]


class PodState:
    """One pod's churn state: crash-looping or not, and its restart count."""

    def __init__(self, namespace: str, name: str, container: str, image: str):
        self.namespace, self.name, self.container, self.image = namespace, name, container, image
        self.crashed = False
        self.restarts = 0

    def next_patch(self) -> dict:
        """The body of this pod's next update (and the state it records)."""
        self.crashed = not self.crashed
        self.restarts += self.crashed
        return status_patch(self.container, self.image, self.restarts, self.crashed)


def run(config: dict) -> dict:
    """Churn per `config` (see the module docstring) until its seconds are up; the summary."""
    threads = int(config.get("threads", 16))
    rate = float(config["rate"])
    seconds = float(config["seconds"])
    pods = [PodState(*p) for p in config["pods"]]
    patcher = Patcher(config["kubeconfig"], threads + 4)
    lock = threading.Lock()
    totals = {"sent": 0, "ok": 0, "errors": {}, "first_error": ""}
    latencies: list[float] = []
    start = time.monotonic()
    end = start + seconds

    def loop(mine: list[PodState]) -> None:
        interval = threads / rate
        due = time.monotonic()
        i, mine_lat, sent, ok, errors, first = 0, [], 0, 0, {}, ""
        while mine:
            now = time.monotonic()
            if now >= end:
                break
            if due > now:
                time.sleep(due - now)
            elif now - due > 1.0:
                due = now  # more than a second behind: drop the backlog rather than burst
            due += interval
            pod = mine[i % len(mine)]
            i += 1
            t0 = time.monotonic()
            try:
                status, text = patcher.patch(pod.namespace, pod.name, pod.next_patch())
            except Exception as exc:  # noqa: BLE001 - counted, the churn goes on
                status, text = 0, f"{type(exc).__name__}: {exc}"
            mine_lat.append(time.monotonic() - t0)
            sent += 1
            if status == 200:
                ok += 1
            else:
                errors[str(status)] = errors.get(str(status), 0) + 1
                first = first or text
        with lock:
            totals["sent"] += sent
            totals["ok"] += ok
            for k, v in errors.items():
                totals["errors"][k] = totals["errors"].get(k, 0) + v
            totals["first_error"] = totals["first_error"] or first
            latencies.extend(mine_lat)

    workers = [threading.Thread(target=loop, args=(pods[k::threads],), daemon=True) for k in range(threads)]
    for t in workers:
        t.start()
    for t in workers:
        t.join()
    took = time.monotonic() - start
    latencies.sort()

    def pct(q: float) -> float:
        return round(latencies[min(len(latencies) - 1, int(q / 100 * len(latencies)))] * 1000, 1) if latencies else 0.0

    return {**totals, "seconds": round(took, 1), "rate": round(totals["ok"] / took, 1) if took else 0.0,
            "latency_p50_ms": pct(50), "latency_p99_ms": pct(99)}


if __name__ == "__main__":
    with open(sys.argv[1]) as f:
        summary = run(json.load(f))
    print(json.dumps(summary), flush=True)
