"""A real Kubernetes control plane (1.37.2 by default, or 1.36.3) on this machine, as plain processes:
gangweb's test and default cluster.

etcd, kube-apiserver, kube-controller-manager and kube-scheduler are built from the Go module proxy by
``localcluster/build.sh``; kwok simulates GPU nodes and the pods bound to them; the Kueue manager runs beside them
when asked (``ClusterConfig(kueue=True)``, ``start_kueue``; the CLI's ``up`` by default). See
``docs/local-cluster.md``.

    >>> cluster = up(ClusterConfig(nodes=4, gpus_per_node=8))   # returns once ready
    >>> cluster.kubeconfig
    >>> cluster.add_node("extra-0", gpus=2, labels={"topology.kubernetes.io/rack": "rack-9"})
    >>> down()

    >>> switch_version(default_state_dir(), "1.37.2")            # in-place upgrade over the same etcd

Command line: ``python -m localcluster up|down|status|build|switch [--k8s-version 1.37.2]`` or
``python manage.py localcluster ...``; ``GANGWEB_K8S_VERSION`` picks the release too.
"""

from .binaries import (
    K8S_VERSION_ENV,
    Binaries,
    BinariesMissing,
    find_binaries,
    find_helm,
    find_kueue,
    k8s_versions,
    require_binaries,
    require_kueue,
    resolve_k8s_version,
)
from .cluster import (
    ClusterConfig,
    ClusterStartError,
    ClusterStatus,
    ComponentStatus,
    LocalCluster,
    attach,
    down,
    start_kueue,
    status,
    switch_version,
    up,
)
from .components import FEATURE_GATES, RUNTIME_CONFIG
from .nodes import (
    BLOCK_LABEL,
    FAKE_NODE_LABEL,
    GPU_COUNT_LABEL,
    GPU_PRODUCT_LABEL,
    GPU_RESOURCE,
    RACK_LABEL,
    NodeSpec,
    add_node,
    remove_node,
)
from .stages import SIM_DURATION_ANNOTATION, SIM_EXIT_ANNOTATION
from .state import default_state_dir

__all__ = [
    "BLOCK_LABEL",
    "FAKE_NODE_LABEL",
    "FEATURE_GATES",
    "GPU_COUNT_LABEL",
    "GPU_PRODUCT_LABEL",
    "GPU_RESOURCE",
    "K8S_VERSION_ENV",
    "RACK_LABEL",
    "RUNTIME_CONFIG",
    "SIM_DURATION_ANNOTATION",
    "SIM_EXIT_ANNOTATION",
    "Binaries",
    "BinariesMissing",
    "ClusterConfig",
    "ClusterStartError",
    "ClusterStatus",
    "ComponentStatus",
    "LocalCluster",
    "NodeSpec",
    "add_node",
    "attach",
    "default_state_dir",
    "down",
    "find_binaries",
    "find_helm",
    "find_kueue",
    "k8s_versions",
    "remove_node",
    "require_binaries",
    "require_kueue",
    "resolve_k8s_version",
    "start_kueue",
    "status",
    "switch_version",
    "up",
]
