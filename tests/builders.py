"""Test builders: small functions that make valid objects, with keyword overrides for what a test varies."""
from __future__ import annotations

import copy
import itertools

from scheduling.models import Cluster, QueuePolicy
from scheduling.services.templates import versions as template_versions

_seq = itertools.count(1)


def container(name="main", image="registry.example/train:1", cpu="1", memory="1Gi", gpu=None, **extra) -> dict:
    """A container dict with requests; `gpu` adds nvidia.com/gpu to requests and limits."""
    requests = {"cpu": cpu, "memory": memory}
    limits = {}
    if gpu is not None:
        requests["nvidia.com/gpu"] = limits["nvidia.com/gpu"] = str(gpu)
    c = {"name": name, "image": image, "resources": {"requests": requests}}
    if limits:
        c["resources"]["limits"] = limits
    c.update(extra)
    return c


def pod_set(name="worker", replicas=2, containers=None, **extra) -> dict:
    """A pod set with one container by default."""
    ps = {"name": name, "replicas": replicas,
          "template": {"metadata": {}, "spec": {"containers": containers or [container()]}}}
    ps.update(extra)
    return ps


def template_spec(backend="k8s-workload", pod_sets=None, overridable=None, **extra) -> dict:
    """A valid runtime template spec."""
    spec = {"backend": backend, "gang": {"scheduleTimeoutSeconds": 60},
            "podSets": pod_sets or [pod_set()],
            "overridable": overridable if overridable is not None else ["podSets.*.replicas", "podSets.*.resources"]}
    spec.update(extra)
    return copy.deepcopy(spec)


def make_template(name=None, user=None, **spec_kwargs):
    """Create a runtime template (version 1) and return the RuntimeTemplateVersion."""
    return template_versions.create_template(user, name or f"tmpl-{next(_seq)}", "", template_spec(**spec_kwargs))


def kubeconfig(token: str = "t", server: str = "https://127.0.0.1:6443", comment: str = "") -> str:
    """A minimal kubeconfig that follows gangweb's rules (inline token, https; loopback is allowed in tests)."""
    return (f"apiVersion: v1\nkind: Config\n{comment}clusters: [{{name: c, cluster: {{server: '{server}'}}}}]\n"
            f"users: [{{name: u, user: {{token: '{token}'}}}}]\n"
            "contexts: [{name: x, context: {cluster: c, user: u}}]\ncurrent-context: x\n")


def make_cluster(name=None, **fields) -> Cluster:
    """A registered cluster without credentials (API tests never reach it)."""
    return Cluster.objects.create(name=name or f"cluster-{next(_seq)}", **fields)


def make_known_cluster(name, gpus, **fields) -> Cluster:
    """A healthy cluster probed just now with `gpus` GPUs (and 8 cores and 64 GiB per GPU) on 2 schedulable nodes,
    serving the Workload API backend: what placement needs to know of a cluster (`fields` override)."""
    from django.utils import timezone

    values = dict(health="Healthy", last_probe_at=timezone.now(), available_backends=["k8s-workload-v1beta1"],
                  capacity={"nodes": 2, "allocatable": {"nvidia.com/gpu": gpus, "cpu": 8 * gpus,
                                                        "memory": 64 * gpus * 2**30}})
    values.update(fields)
    return make_cluster(name, **values)


def make_queue(name=None, parent=None, clusters=(), **fields) -> QueuePolicy:
    """A leaf queue with unlimited limits that allows namespace "default" (a queue allows none unless listed)."""
    fields.setdefault("allowed_namespaces", ["default"])
    queue = QueuePolicy.objects.create(name=name or f"queue-{next(_seq)}", parent=parent, **fields)
    if clusters:
        queue.clusters.set(clusters)
    return queue


def make_job(template, queue, cluster, name=None, phase=None, user=None, overrides=None, at=None, **fields):
    """Submit a job through the service, then (optionally) move it to `phase`, recording each transition in
    lifecycle order from `at` (default: now) one second apart, as the reconciler would."""
    from datetime import timedelta

    from django.utils import timezone

    from scheduling.choices import GangPhase
    from scheduling.models import GangJob, PhaseTransition
    from scheduling.services.jobs import lifecycle as job_service

    body = submit_body(template, queue, cluster, name=name)
    if overrides:
        body["overrides"] = overrides
    job, _ = job_service.submit(user, body)
    if phase and phase != GangPhase.SUBMITTED:
        order = [GangPhase.DISPATCHED, GangPhase.QUEUED, GangPhase.SCHEDULED, GangPhase.RUNNING]
        terminal = phase in (GangPhase.SUCCEEDED, GangPhase.FAILED, GangPhase.CANCELLED)
        steps = order[:order.index(phase) + 1] if phase in order else [*order, phase]
        start = at or timezone.now()
        PhaseTransition.objects.filter(job=job).delete()
        PhaseTransition.objects.create(job=job, phase=GangPhase.SUBMITTED, at=start, source="gangweb")
        t = start
        for i, step in enumerate(steps, 1):
            t = start + timedelta(seconds=i)
            PhaseTransition.objects.create(job=job, phase=step, at=t, source="test", reason=f"Became{step}")
        GangJob.objects.filter(pk=job.pk).update(phase=phase, phase_changed_at=t,
                                                 finished_at=t if terminal else None, **fields)
        job.refresh_from_db()
    return job


def submit_body(template, queue, cluster, name=None, **extra) -> dict:
    """A valid submit body for the API."""
    body = {"name": name or f"job-{next(_seq)}", "namespace": "default", "template": template.template.name,
            "queue": queue.name, "cluster": cluster.name}
    body.update(extra)
    return body


def make_user(username, *, groups=(), **fields):
    """A user (password "pw-<username>") in the named groups, created as needed."""
    from django.contrib.auth.models import Group, User

    user = User.objects.create_user(username, f"{username}@example.com", f"pw-{username}", **fields)
    for name in groups:
        user.groups.add(Group.objects.get_or_create(name=name)[0])
    return user


def grant(target, role, *, user=None, group=None):
    """A QueueGrant or ClusterGrant (by the type of `target`) of `role` to a user or a group name."""
    from django.contrib.auth.models import Group

    from scheduling.models import ClusterGrant, QueueGrant

    grantee = {"user": user} if user is not None else {"group": Group.objects.get_or_create(name=group)[0]}
    if isinstance(target, Cluster):
        return ClusterGrant.objects.create(cluster=target, role=role, **grantee)
    return QueueGrant.objects.create(queue=target, role=role, **grantee)


def make_token(owner, actions=("read", "submit"), queues=(), **fields) -> str:
    """Create an API token for `owner` through the service and return its plaintext; `fields` set on the row."""
    from scheduling.models import ApiToken
    from scheduling.services.access import tokens

    token, plaintext = tokens.create(owner, {"name": f"token-{next(_seq)}", "actions": list(actions),
                                             "queues": [q.name for q in queues]})
    if fields:
        ApiToken.objects.filter(pk=token.pk).update(**fields)
    return plaintext
