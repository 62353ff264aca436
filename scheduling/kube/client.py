"""An API client per cluster: from its stored kubeconfig (+ context) or the pod's service account.

Clients are cached per process, keyed by the cluster's id and a hash of its connection settings, so editing a
cluster's kubeconfig takes effect on the next call without a restart. Requests time out (`REQUEST_TIMEOUT`) and
urllib3 retries once, so an unreachable cluster fails a reconcile pass in seconds instead of hanging a worker.
"""
from __future__ import annotations

import hashlib
import threading

import yaml
from kubernetes import client, config

from .errors import TerminalKubeError

REQUEST_TIMEOUT = (5, 30)  # (connect, read) seconds, passed as _request_timeout
_cache: dict[tuple[int, str], client.ApiClient] = {}
_lock = threading.Lock()


def _fingerprint(cluster) -> str:
    raw = f"{cluster.in_cluster}\0{cluster.context}\0{cluster.kubeconfig}".encode()
    return hashlib.sha256(raw).hexdigest()


def build_client(cluster) -> client.ApiClient:
    """A new ApiClient for `cluster` (a scheduling.models.Cluster). Raises TerminalKubeError("InvalidKubeconfig")
    when the kubeconfig cannot be parsed or names an unknown context."""
    configuration = client.Configuration()
    try:
        if cluster.in_cluster:
            config.load_incluster_config(client_configuration=configuration)
        else:
            data = yaml.safe_load(cluster.kubeconfig or "")
            if not isinstance(data, dict):
                raise config.ConfigException("the kubeconfig is empty or not a YAML mapping")
            loader = config.kube_config.KubeConfigLoader(config_dict=data, active_context=cluster.context or None)
            loader.load_and_set(configuration)
    except (config.ConfigException, yaml.YAMLError, KeyError, ValueError) as exc:
        raise TerminalKubeError("InvalidKubeconfig", f"cluster {cluster.name}: {exc}") from exc
    configuration.retries = 1
    return client.ApiClient(configuration)


def api_client(cluster) -> client.ApiClient:
    """The cached ApiClient for `cluster` (built on first use and whenever its connection settings change)."""
    key = (cluster.pk, _fingerprint(cluster))
    with _lock:
        cached = _cache.get(key)
        if cached is None:
            for old in [k for k in _cache if k[0] == cluster.pk]:
                _cache.pop(old).close()
            cached = _cache[key] = build_client(cluster)
        return cached


def forget(cluster_pk: int | None = None) -> None:
    """Drop cached clients (of one cluster, or all); tests and the cluster editor call this."""
    with _lock:
        for key in [k for k in _cache if cluster_pk is None or k[0] == cluster_pk]:
            _cache.pop(key).close()
