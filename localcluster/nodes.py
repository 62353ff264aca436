"""Fake GPU nodes simulated by kwok: build, add, remove, wait for Ready.

A node is an ordinary ``v1.Node`` carrying the annotation ``kwok.x-k8s.io/node: fake``; kwok manages exactly those
(``--manage-nodes-with-annotation-selector``), makes them Ready and runs the pods bound to them. Nodes are
**not tainted**: in this cluster every node is fake, so pods need no toleration.

Labels on every node:

- ``kubernetes.io/hostname``, ``kubernetes.io/os=linux``, ``kubernetes.io/arch=amd64``, ``type=kwok``;
- `RACK_LABEL` and `BLOCK_LABEL`: topology levels (block ⊃ rack ⊃ node) for topology-aware scheduling tests;
- `GPU_PRODUCT_LABEL` and `GPU_COUNT_LABEL` when the node has GPUs, as NVIDIA's GPU feature discovery sets them;
- `FAKE_NODE_LABEL` so tests and tools can select simulated nodes.

Capacity is ``cpu``, ``memory``, ``pods`` and, when ``gpus > 0``, the extended resource ``nvidia.com/gpu``. Pods ask
for GPUs with ``resources.limits: {nvidia.com/gpu: N}`` (requests default to limits for extended resources).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from kubernetes import client
from kubernetes.client.rest import ApiException

from .components import KWOK_NODE_ANNOTATION, KWOK_NODE_ANNOTATION_VALUE

GPU_RESOURCE = "nvidia.com/gpu"
RACK_LABEL = "topology.kubernetes.io/rack"
BLOCK_LABEL = "topology.kubernetes.io/block"
GPU_PRODUCT_LABEL = "nvidia.com/gpu.product"
GPU_COUNT_LABEL = "nvidia.com/gpu.count"
FAKE_NODE_LABEL = "gangweb.io/fake-node"
DEFAULT_GPU_PRODUCT = "NVIDIA-H100-80GB-HBM3"

# Taints the node lifecycle controller puts on a node until it is Ready; scheduling waits for them to go.
_NOT_READY_TAINT_PREFIX = "node.kubernetes.io/"


@dataclass
class NodeSpec:
    """A fake node's name, capacity and extra labels.

    ``cpu`` and ``memory`` are Kubernetes quantities ("64", "512Gi"); ``gpus`` is the ``nvidia.com/gpu`` count.
    """

    name: str
    cpu: str = "64"
    memory: str = "512Gi"
    gpus: int = 8
    pods: int = 110
    labels: dict[str, str] = field(default_factory=dict)


def default_node_specs(
    count: int = 4,
    *,
    gpus_per_node: int = 8,
    cpu: str = "64",
    memory: str = "512Gi",
    nodes_per_rack: int = 2,
    racks_per_block: int = 2,
    prefix: str = "node",
) -> list[NodeSpec]:
    """Return ``count`` node specs named ``<prefix>-0..`` laid out ``nodes_per_rack`` per rack, racks in blocks.

    With the defaults (4 nodes): node-0 and node-1 in rack-0, node-2 and node-3 in rack-1, both racks in block-0.
    """
    specs = []
    for i in range(count):
        rack = i // nodes_per_rack
        block = rack // racks_per_block
        specs.append(
            NodeSpec(
                name=f"{prefix}-{i}",
                cpu=cpu,
                memory=memory,
                gpus=gpus_per_node,
                labels={RACK_LABEL: f"rack-{rack}", BLOCK_LABEL: f"block-{block}"},
            )
        )
    return specs


def _capacity(spec: NodeSpec) -> dict[str, str]:
    capacity = {"cpu": str(spec.cpu), "memory": str(spec.memory), "pods": str(spec.pods)}
    if spec.gpus:
        capacity[GPU_RESOURCE] = str(spec.gpus)
    return capacity


def node_manifest(spec: NodeSpec) -> dict:
    """Return the Node object (a dict) for ``spec``, with capacity and allocatable in its status."""
    labels = {
        "kubernetes.io/hostname": spec.name,
        "kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64",
        "type": "kwok",
        FAKE_NODE_LABEL: "true",
    }
    if spec.gpus:
        labels[GPU_PRODUCT_LABEL] = DEFAULT_GPU_PRODUCT
        labels[GPU_COUNT_LABEL] = str(spec.gpus)
    labels.update(spec.labels)
    capacity = _capacity(spec)
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": spec.name,
            "labels": labels,
            "annotations": {KWOK_NODE_ANNOTATION: KWOK_NODE_ANNOTATION_VALUE, "node.alpha.kubernetes.io/ttl": "0"},
        },
        "spec": {},
        "status": {
            "capacity": capacity,
            "allocatable": dict(capacity),
            "nodeInfo": {
                "architecture": "amd64",
                "operatingSystem": "linux",
                "kubeletVersion": "fake",
                "kubeProxyVersion": "fake",
            },
            "phase": "Running",
        },
    }


def node_is_ready(node: client.V1Node) -> bool:
    """True if the node's Ready condition is True and no ``node.kubernetes.io/*`` NoSchedule taint is left."""
    conditions = (node.status and node.status.conditions) or []
    ready = any(c.type == "Ready" and c.status == "True" for c in conditions)
    taints = (node.spec and node.spec.taints) or []
    blocked = any(t.key.startswith(_NOT_READY_TAINT_PREFIX) for t in taints)
    return ready and not blocked


def create_node(api: client.ApiClient, spec: NodeSpec) -> None:
    """Create the node and set its capacity through the status subresource.

    The status is written twice (in the create and as a status patch) so the capacity holds whichever of us and
    kwok's node-initialize stage writes first.
    """
    core = client.CoreV1Api(api)
    manifest = node_manifest(spec)
    core.create_node(manifest)
    core.patch_node_status(spec.name, {"status": {"capacity": manifest["status"]["capacity"],
                                                  "allocatable": manifest["status"]["allocatable"]}})


def wait_nodes_ready(api: client.ApiClient, names: list[str], timeout: float = 60.0) -> None:
    """Block until every node in ``names`` is Ready and schedulable (see `node_is_ready`); TimeoutError otherwise."""
    core = client.CoreV1Api(api)
    deadline = time.monotonic() + timeout
    pending = set(names)
    while pending:
        for node in core.list_node().items:
            if node.metadata.name in pending and node_is_ready(node):
                pending.discard(node.metadata.name)
        if not pending:
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"nodes not Ready after {timeout:.0f}s: {', '.join(sorted(pending))}")
        time.sleep(0.25)


def add_node(
    api: client.ApiClient,
    name: str,
    *,
    cpu: str = "64",
    memory: str = "512Gi",
    gpus: int = 8,
    pods: int = 110,
    labels: dict[str, str] | None = None,
    wait: bool = True,
    timeout: float = 60.0,
) -> NodeSpec:
    """Add a fake node to a running cluster and (by default) wait until it is Ready; return its spec.

    ``labels`` are added to the standard ones (and may override them, e.g. the rack). Raises `ApiException`
    (409) if a node of that name exists.
    """
    spec = NodeSpec(name=name, cpu=cpu, memory=memory, gpus=gpus, pods=pods, labels=dict(labels or {}))
    create_node(api, spec)
    if wait:
        wait_nodes_ready(api, [name], timeout)
    return spec


def remove_node(
    api: client.ApiClient, name: str, *, delete_pods: bool = True, wait: bool = True, timeout: float = 60.0
) -> None:
    """Remove a fake node; with ``delete_pods`` also force-delete the pods bound to it, as a node loss would.

    Without ``delete_pods`` the pods stay until kube-controller-manager's pod GC removes orphans (about 40 s).
    A node that does not exist is not an error.
    """
    core = client.CoreV1Api(api)
    try:
        core.delete_node(name)
    except ApiException as e:
        if e.status != 404:
            raise
    if delete_pods:
        pods = core.list_pod_for_all_namespaces(field_selector=f"spec.nodeName={name}").items
        for pod in pods:
            try:
                core.delete_namespaced_pod(pod.metadata.name, pod.metadata.namespace, grace_period_seconds=0)
            except ApiException as e:
                if e.status != 404:
                    raise
    if wait:
        deadline = time.monotonic() + timeout
        while True:
            try:
                core.read_node(name)
            except ApiException as e:
                if e.status == 404:
                    return
                raise
            if time.monotonic() > deadline:
                raise TimeoutError(f"node {name} still present after {timeout:.0f}s")
            time.sleep(0.25)
