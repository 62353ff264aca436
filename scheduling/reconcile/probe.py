"""Probe a cluster: is it reachable, which Kubernetes version, which APIs and therefore which backends.

Two requests: `GET /version` and `GET /apis`. The result is written to the Cluster row (health,
health_message, server_version, served_apis as sorted "group/version" strings, available_backends as registry
names, last_probe_at) and a ReconcileAttempt of kind "probe".
"""
from __future__ import annotations

import time

from django.utils import timezone
from kubernetes import client

from ..backends import discovery
from ..choices import ClusterHealth, ReconcileOutcome
from ..kube import client as kube_client
from ..kube.errors import FORBIDDEN, UNAUTHORIZED, KubeError, TransientKubeError, call
from ..models import Cluster, ReconcileAttempt


def probe_cluster(cluster: Cluster) -> Cluster:
    """Probe `cluster` and save what was found. Never raises for cluster failures: they become its health."""
    started = time.monotonic()
    outcome, reason, message = ReconcileOutcome.OK, "", ""
    try:
        api = kube_client.api_client(cluster)
        version = call(client.VersionApi(api).get_code)
        served = discovery.served_versions(api)
        cluster.health, cluster.health_message = ClusterHealth.HEALTHY, ""
        cluster.server_version = version.git_version or ""
        cluster.served_apis = sorted(served)
        cluster.available_backends = discovery.available_backends(served)
    except KubeError as exc:
        outcome = (ReconcileOutcome.TRANSIENT_ERROR if isinstance(exc, TransientKubeError)
                   else ReconcileOutcome.TERMINAL_ERROR)
        reason, message = exc.reason, exc.message
        cluster.health = ClusterHealth.FORBIDDEN if exc.reason in (FORBIDDEN, UNAUTHORIZED) else (
            ClusterHealth.UNREACHABLE)
        cluster.health_message = f"{exc.reason}: {exc.message}"[:2000]
    cluster.last_probe_at = timezone.now()
    cluster.save(update_fields=["health", "health_message", "server_version", "served_apis", "available_backends",
                                "last_probe_at", "updated_at"])
    ReconcileAttempt.objects.create(kind=ReconcileAttempt.KIND_PROBE, cluster=cluster, outcome=outcome,
                                    reason=reason, message=message[:2000],
                                    duration_ms=int((time.monotonic() - started) * 1000),
                                    actions=list(cluster.available_backends))
    return cluster


def probe_all() -> list[Cluster]:
    """Probe every registered cluster."""
    return [probe_cluster(cluster) for cluster in Cluster.objects.all()]
