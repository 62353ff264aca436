"""Probe a cluster: is it reachable, which Kubernetes version, which APIs and therefore which backends.

Four requests: `GET /version`, `GET /apis`, a LIST of RuntimeClasses (their pod overheads, for
`kube.resources`) and a LIST of PriorityClasses (names, for the submit warnings); a failure of either LIST keeps
the last list and does not change health. Then, per available backend family, up to three LISTs (its scheduler's
Leases by name, its Events by reporting component) saying when its scheduler was last seen acting
(`scheduler_presence`, kube/scheduler_presence.py); a failure there leaves that family's presence unknown.
The result is written to the Cluster row (health, health_message,
server_version, served_apis as sorted "group/version" strings, available_backends as registry names,
runtime_classes, priority_classes, last_probe_at) and a ReconcileAttempt of kind "probe".

What is shown of a failure is `kube.errors.describe`'s account: never a token, a response body or a file's
content (issue 15, M1). A server whose answers are not Kubernetes documents (a `/version` without a version, an
`/apis` that is no APIGroupList) is reported as NotKubernetes on that cluster; `probe_all` probes every cluster
whatever one of them answers or raises (issue 15, L1).
"""
from __future__ import annotations

import logging
import re
import time

from django.utils import timezone
from kubernetes import client

from ..backends import discovery
from ..choices import ClusterHealth, ReconcileOutcome
from ..kube import client as kube_client
from ..kube import priority_classes, runtime_classes, scheduler_presence
from ..kube.client import REQUEST_TIMEOUT
from ..kube.errors import (
    FORBIDDEN,
    UNAUTHORIZED,
    TerminalKubeError,
    TransientKubeError,
    call,
    classify,
    describe,
)
from ..models import Cluster, ReconcileAttempt

log = logging.getLogger(__name__)
NOT_KUBERNETES = "NotKubernetes"
PROBE_FAILED = "ProbeFailed"
# kube-apiserver's gitVersion ("v1.36.3", "v1.30.2-eks-1a2b3c", "v1.29.0+k3s1"), within the 64-character column.
GIT_VERSION = re.compile(r"^v?\d+\.\d+(\.\d+)?[0-9A-Za-z.+_-]{0,40}$")
NOT_A_VERSION = "GET /version did not answer a Kubernetes version document"


def _version(api: client.ApiClient) -> str:
    """The server's gitVersion from GET /version. Raises TerminalKubeError NotKubernetes when the answer is not a
    Kubernetes version document (kubernetes VersionInfo with a gitVersion like "v1.36.3"), and what
    `kube.errors.call` raises."""
    try:
        # Bounded like every other request: a stalled (SIGSTOPped) API server must make the probe say Unreachable,
        # not hang it until the task's time limit.
        version = call(client.VersionApi(api).get_code, _request_timeout=REQUEST_TIMEOUT)
    except (ValueError, TypeError, AttributeError) as exc:  # the client could not read the answer as VersionInfo
        raise TerminalKubeError(NOT_KUBERNETES, NOT_A_VERSION) from exc
    git_version = getattr(version, "git_version", None)
    if not isinstance(git_version, str) or not GIT_VERSION.match(git_version):
        raise TerminalKubeError(NOT_KUBERNETES, NOT_A_VERSION)
    return git_version


# Facts of a cluster that a probe reads when it can: (Cluster field, reader: one LIST, what they are for). The
# credentials may not be allowed to list them (403): the last value stays and the cluster's health is unchanged.
OPTIONAL_FACTS = (
    ("runtime_classes", runtime_classes.read, "RuntimeClasses, the pod overheads gangweb counts"),
    ("priority_classes", priority_classes.read, "PriorityClasses, for the submit warnings"),
)


def refresh_optional_facts(cluster: Cluster, api: client.ApiClient) -> dict[str, bool]:
    """Read each of `OPTIONAL_FACTS` into its `cluster` field (in memory; the caller saves). Returns {field: True
    when read}; a reader's failure (any exception, e.g. 403 from `kube.objects.list_objects`) is logged by its
    type only (the message may quote the server) and keeps the field's last value. Never raises."""
    read = {}
    for field, reader, what in OPTIONAL_FACTS:
        try:
            setattr(cluster, field, reader(api))
        except Exception as exc:  # noqa: BLE001 - optional facts: the probe's health must not depend on them
            log.warning("cluster %s: %s not read (%s); the last list stays", cluster.name, what, type(exc).__name__)
            read[field] = False
        else:
            read[field] = True
    return read


DEFAULT_SCHEDULER = "default-scheduler"  # kube-scheduler's profile name: what its Events report


def refresh_scheduler_presence(cluster: Cluster, api: client.ApiClient) -> None:
    """Record in `cluster.scheduler_presence` (in memory; the caller saves) when each available backend's scheduler
    was last seen acting (kube/scheduler_presence.py): {family: {"scheduler", "seen_at", "by", "read"}}. A family
    whose evidence could not be read (403 on Leases or Events, a timeout) keeps its last sighting with
    "read": False (presence unknown). Families no longer available are dropped. Never raises."""
    from ..backends import registry

    families = set()
    for name in cluster.available_backends:
        try:
            families.add(registry.by_name(name).family)
        except KeyError:  # a plugin this version no longer has: nothing to look for
            continue
    families = sorted(families)
    last = cluster.scheduler_presence if isinstance(cluster.scheduler_presence, dict) else {}
    now, out = timezone.now(), {}
    for family in families:
        name = cluster.scheduler_name_for(family) or DEFAULT_SCHEDULER
        try:
            seen = scheduler_presence.sighting(api, name, registry.scheduler_leases(family), now)
        except Exception as exc:  # noqa: BLE001 - presence is optional: the probe's health must not depend on it
            log.warning("cluster %s: presence of %s not read (%s)", cluster.name, name, type(exc).__name__)
            previous = last.get(family) if isinstance(last.get(family), dict) else {}
            out[family] = {"scheduler": name, "seen_at": previous.get("seen_at"), "by": previous.get("by", ""),
                           "read": False}
            continue
        out[family] = {"scheduler": name, "seen_at": seen.seen_at.isoformat() if seen.seen_at else None,
                       "by": seen.by, "read": True}
    cluster.scheduler_presence = out


def probe_cluster(cluster: Cluster) -> Cluster:
    """Probe `cluster` and save what was found. Never raises for cluster failures: they become its health
    (Forbidden for 401/403, else Unreachable), with a message safe for any viewer."""
    started = time.monotonic()
    outcome, reason, message = ReconcileOutcome.OK, "", ""
    try:
        api = kube_client.api_client(cluster)
        version = _version(api)
        try:
            served = discovery.served_versions(api)
        except (ValueError, TypeError, AttributeError) as exc:
            raise TerminalKubeError(NOT_KUBERNETES, "GET /apis did not answer a Kubernetes APIGroupList") from exc
        cluster.health, cluster.health_message = ClusterHealth.HEALTHY, ""
        cluster.server_version = version
        cluster.served_apis = sorted(served)
        cluster.available_backends = discovery.available_backends(served)
        refresh_optional_facts(cluster, api)
        refresh_scheduler_presence(cluster, api)
    except Exception as exc:  # noqa: BLE001 - any failure is this cluster's: recorded, never raised
        failure = classify(exc)
        if failure is None:  # not an API answer: a bug or an answer the client could not read
            # The traceback's text may quote a server's answer: the log gets it only at DEBUG level.
            log.warning("probe of cluster %s failed unexpectedly: %s", cluster.name, describe(exc))
            log.debug("probe of cluster %s: traceback", cluster.name, exc_info=True)
            failure = TerminalKubeError(PROBE_FAILED, describe(exc))
        outcome = (ReconcileOutcome.TRANSIENT_ERROR if isinstance(failure, TransientKubeError)
                   else ReconcileOutcome.TERMINAL_ERROR)
        reason, message = failure.reason, describe(failure, 2000).partition(": ")[2]
        cluster.health = ClusterHealth.FORBIDDEN if failure.reason in (FORBIDDEN, UNAUTHORIZED) else (
            ClusterHealth.UNREACHABLE)
        cluster.health_message = describe(failure, 2000)
    cluster.last_probe_at = timezone.now()
    # Since when it has been unreachable: the first failed probe in a row (placement and lost clusters read it).
    cluster.unreachable_since = ((cluster.unreachable_since or cluster.last_probe_at)
                                 if cluster.health == ClusterHealth.UNREACHABLE else None)
    cluster.save(update_fields=["health", "health_message", "server_version", "served_apis", "available_backends",
                                "runtime_classes", "priority_classes", "scheduler_presence", "last_probe_at",
                                "unreachable_since", "updated_at"])
    ReconcileAttempt.objects.create(kind=ReconcileAttempt.KIND_PROBE, cluster=cluster, outcome=outcome,
                                    reason=reason, message=message[:2000],
                                    duration_ms=int((time.monotonic() - started) * 1000),
                                    actions=list(cluster.available_backends))
    return cluster


def probe_cluster_id(cluster_id: int) -> Cluster | None:
    """`probe_cluster` of the cluster with this id (the `scheduling.probe_cluster` task); None, logged, when it no
    longer exists."""
    cluster = Cluster.objects.filter(pk=cluster_id).first()
    if cluster is None:
        log.info("probe: cluster %s no longer exists", cluster_id)
        return None
    return probe_cluster(cluster)


def probe_all() -> list[Cluster]:
    """Probe every registered cluster. One cluster's failure, even one that escapes `probe_cluster` (its row
    failing to save), is logged and the others are still probed (issue 15, L1). Returns the clusters probed."""
    probed = []
    for cluster in Cluster.objects.all():
        try:
            probed.append(probe_cluster(cluster))
        except Exception as exc:  # noqa: BLE001 - isolate each cluster
            log.error("probe of cluster %s failed: %s", cluster.name, describe(exc))
            log.debug("probe of cluster %s: traceback", cluster.name, exc_info=True)
    return probed
