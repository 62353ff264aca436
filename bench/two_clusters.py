"""Two local control planes of unequal size behind one gangweb stack (bench/placement_real.py): `TwoClusterStack`
(a FaultStack whose services run as in production: placement, the moves' rounds, the watcher and the probes), the
queue and template it registers, and the two commands its seeding runs in the stack's environment:

    python -m bench.two_clusters seed BIG_KUBECONFIG SMALL_KUBECONFIG MOVE_AFTER DURATION
    python -m bench.two_clusters allow NAMESPACE
"""
from __future__ import annotations

import json
import sys
import uuid
from pathlib import Path

from .faultstack import FaultStack, create_namespace
from .stack import log, wait_for

QUEUE = "place"
TEMPLATE = "place"
CLUSTERS = ("big", "small")
GPUS_PER_NODE = 8


def template_spec(duration: float) -> dict:
    """A k8s-workload gang of 1-GPU pods (replicas overridable) that run `duration` seconds once Running."""
    return {
        "backend": "k8s-workload",
        "gang": {"scheduleTimeoutSeconds": 60},
        "podSets": [{"name": "worker", "replicas": 1, "template": {
            "metadata": {"annotations": {"gangweb.io/sim-duration": f"{int(duration)}s"}},
            "spec": {"containers": [{"name": "main", "image": "registry.example/train:1", "resources": {
                "requests": {"cpu": "10m", "memory": "16Mi", "nvidia.com/gpu": "1"},
                "limits": {"nvidia.com/gpu": "1"}}}]}}}],
        "overridable": ["podSets.*.replicas"],
    }


class TwoClusterStack(FaultStack):
    """FaultStack's services with two control planes registered as "big" and "small" (KWOK nodes of 8 GPUs) and
    queue "place" over both; `close()` stops them too."""

    planes: dict = None
    plane_dirs: list = None

    def start_two(self, big: int, small: int, move_after: int, duration: float, resync_seconds: int,
                  worker_concurrency: int = 2) -> TwoClusterStack:
        """Start everything (module docstring) and return once both clusters are probed healthy with the GPUs
        the watcher recorded. Returns self."""
        import localcluster

        self.planes, self.plane_dirs = {}, []
        self.configure(resync_seconds)
        self.env["DATABASE_URL"] = self.start_private_postgres()
        self.env["REDIS_URL"] = self.start_redis()
        self.manage("migrate", "--noinput")
        for name, gpus in zip(CLUSTERS, (big, small), strict=True):
            state_dir = self.workdir / f"plane-{name}"
            self.plane_dirs.append(state_dir)
            log(f"starting control plane {name} ({gpus} GPUs)")
            lc = localcluster.up(localcluster.ClusterConfig(state_dir=state_dir, nodes=0, die_with_parent=True))
            self.planes[name] = lc
            for i in range(gpus // GPUS_PER_NODE):
                lc.add_node(f"{name}-n{i}", gpus=GPUS_PER_NODE, pods=1000)
        seeded = json.loads(self.manage_output([
            sys.executable, "-m", "bench.two_clusters", "seed", str(self.planes["big"].kubeconfig),
            str(self.planes["small"].kubeconfig), str(move_after), str(duration)]))
        self.token, self.password = seeded["token"], seeded["password"]
        self.start_services(worker_concurrency)
        wait_for(lambda: self.ready({"big": big, "small": small}), 300, "both clusters probed with their GPUs",
                 interval=2)
        return self

    def ready(self, gpus: dict[str, int]) -> bool:
        """True when both clusters are Healthy, their backends probed and the watcher recorded their GPUs."""
        import psycopg

        with psycopg.connect(self.env["DATABASE_URL"], connect_timeout=5) as conn:
            rows = conn.execute("SELECT name, health, capacity, available_backends FROM scheduling_cluster").fetchall()
        seen = {name: (health, capacity or {}, backends) for name, health, capacity, backends in rows}
        return all(name in seen and seen[name][0] == "Healthy" and seen[name][2]
                   and float((seen[name][1].get("allocatable") or {}).get("nvidia.com/gpu", 0)) == want
                   for name, want in gpus.items())

    def allow(self, namespace: str) -> None:
        """Create `namespace` in both clusters and let queue "place" run jobs there."""
        for lc in self.planes.values():
            with lc.api_client() as api:
                create_namespace(api, namespace)
        self.manage_output([sys.executable, "-m", "bench.two_clusters", "allow", namespace])

    def close(self) -> None:
        super().close()
        import localcluster

        for state_dir in self.plane_dirs or []:
            try:
                localcluster.down(state_dir)
            except Exception as exc:  # noqa: BLE001 - keep stopping the rest
                log(f"stopping {state_dir.name} failed: {exc}")


def seed(big_kubeconfig: str, small_kubeconfig: str, move_after: int, duration: float) -> dict:
    """(In the stack's environment.) Clusters "big" and "small" (probed), queue "place" over both (moves after
    `move_after` s), template "place" and an admin with a read/submit/cancel token. Returns {"token", "password"}."""
    import django

    django.setup()
    from django.contrib.auth import get_user_model

    from scheduling.models import Cluster, QueuePolicy
    from scheduling.reconcile import probe
    from scheduling.services.access import tokens
    from scheduling.services.templates import versions as template_versions

    rows = []
    for name, path in zip(CLUSTERS, (big_kubeconfig, small_kubeconfig), strict=True):
        row = Cluster.objects.create(name=name, kubeconfig=Path(path).read_text(),
                                     description=f"placement bench: {name}")
        rows.append(probe.probe_cluster(row))
    queue = QueuePolicy.objects.create(name=QUEUE, allowed_namespaces=[], move_after_seconds=move_after)
    queue.clusters.set(rows)
    password = uuid.uuid4().hex
    user = get_user_model().objects.create_superuser("placer", "placer@example.com", password)
    template_versions.create_template(user, TEMPLATE, f"placement bench: 1-GPU pods for {int(duration)} s",
                                      template_spec(duration))
    _, plaintext = tokens.create(user, {"name": "placer", "actions": ["read", "submit", "cancel"]})
    return {"token": plaintext, "password": password}


def allow_namespace(namespace: str) -> None:
    """(In the stack's environment.) Add `namespace` to queue "place"'s allowed namespaces."""
    import django

    django.setup()
    from scheduling.models import QueuePolicy

    queue = QueuePolicy.objects.get(name=QUEUE)
    queue.allowed_namespaces = [*queue.allowed_namespaces, namespace]
    queue.save(update_fields=["allowed_namespaces"])


if __name__ == "__main__" and sys.argv[1:2] == ["seed"]:
    print(json.dumps(seed(sys.argv[2], sys.argv[3], int(sys.argv[4]), float(sys.argv[5]))))
elif __name__ == "__main__" and sys.argv[1:2] == ["allow"]:
    allow_namespace(sys.argv[2])
