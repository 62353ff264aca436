"""Is a scheduler there? When gangweb last saw it act on a cluster, read from two kinds of evidence.

1. Its leader-election Lease (coordination.k8s.io/v1): a scheduler run with leader election (every production
   install: kube-scheduler's `--leader-elect` defaults to true) renews `spec.renewTime` of its Lease every few
   seconds (client-go leaderelection: retryPeriod 2 s, leaseDuration 15 s), busy or idle. So a renewTime minutes
   old means no leader. kube-scheduler's Lease is `kube-system/kube-scheduler`
   (`--leader-elect-resource-namespace` / `--leader-elect-resource-name` defaults); the other schedulers' names
   are their plugins' `scheduler_leases` (backends/*), looked up by name in every namespace (their namespace is
   chosen at install).
2. Events it reported (core/v1 `reportingComponent`, or `source.component` for the older recorder): a scheduler
   without leader election (a single replica; the local cluster's) still says `Scheduled` / `FailedScheduling`
   under its schedulerName (kube-scheduler: its profile's name, `default-scheduler`) whenever it handles a pod.
   Events live an hour (`--event-ttl`), so an idle scheduler without a Lease is not seen.

Why not its Deployment or pods: a scheduler may run outside the cluster (a managed control plane, the local
cluster's plain processes), and a Deployment with ready replicas says nothing about whether it schedules. Any of
these objects can be written by a cluster admin; gangweb reads the evidence a scheduler leaves when it works and
says which it used. Cluster answers are untrusted: times that do not parse are ignored, and times in the future
count as now.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime

from kubernetes import client

from . import objects
from .refs import EVENT, LEASE
from .times import parse_time

log = logging.getLogger(__name__)
MAX_EVENTS = 200  # one page of a scheduler's events is enough to date it; never more per probe


@dataclass(frozen=True)
class Sighting:
    """When a scheduler was last seen acting (`seen_at`, aware UTC, None when never) and by what (`by`: "Lease
    kube-system/kube-scheduler", "Event from default-scheduler", "")."""

    seen_at: datetime | None
    by: str = ""


def _latest(current: Sighting, when: datetime | None, by: str, now: datetime) -> Sighting:
    if when is None:
        return current
    when = min(when, now)  # a clock ahead of ours, or a forged time, counts as now and no later
    return Sighting(when, by) if current.seen_at is None or when > current.seen_at else current


def _lease_sighting(api: client.ApiClient, leases, now: datetime) -> Sighting:
    found = Sighting(None)
    for namespace, name in leases:
        for item in objects.list_objects(api, LEASE, namespace or None, "", field_selector=f"metadata.name={name}",
                                         limit=10):
            spec = item.get("spec") if isinstance(item.get("spec"), dict) else {}
            if not spec.get("holderIdentity"):  # released: nobody leads
                continue
            meta = item.get("metadata") or {}
            found = _latest(found, parse_time(spec.get("renewTime")) or parse_time(spec.get("acquireTime")),
                            f"Lease {meta.get('namespace', namespace)}/{name}", now)
    return found


def _event_sighting(api: client.ApiClient, component: str, now: datetime) -> Sighting:
    found = Sighting(None)
    for selector in (f"reportingComponent={component}", f"source={component}"):
        if found.seen_at is not None:  # the newer recorder's events dated it: the older field is not asked
            break
        for item in objects.list_objects(api, EVENT, None, "", field_selector=selector, limit=MAX_EVENTS):
            series = item.get("series") if isinstance(item.get("series"), dict) else {}
            when = (parse_time(series.get("lastObservedTime")) or parse_time(item.get("lastTimestamp"))
                    or parse_time(item.get("eventTime")) or parse_time(item.get("firstTimestamp")))
            found = _latest(found, when, f"Event from {component}", now)
    return found


def sighting(api: client.ApiClient, scheduler_name: str, leases, now: datetime) -> Sighting:
    """When the scheduler named `scheduler_name` (the pods' schedulerName; "default-scheduler" for kube-scheduler)
    was last seen acting: its Leases' latest renewTime (`leases`: ((namespace or "" for any, name), ...)); only
    when no held Lease is found, its Events' latest last-seen time (a leader renews every 2 s, so a held Lease is
    the freshest evidence, and Event LISTs, which the API server filters in memory, are spared). One LIST per
    Lease name, plus at most two Event LISTs. Raises what `kube.objects.list_objects` raises (TransientKubeError,
    TerminalKubeError; 403 when gangweb may not list Leases or Events)."""
    by_lease = _lease_sighting(api, leases, now)
    if by_lease.seen_at is not None:
        return by_lease
    return _event_sighting(api, scheduler_name, now)
