"""API discovery: which group/versions a cluster serves, and which backend plugins it can therefore run.

One request (`GET /apis`, the aggregated group list) gives every served "group/version"; the core group adds
"v1". `registry.select(family, served)` then picks the highest version a family's plugins need.
"""
from __future__ import annotations

from kubernetes import client

from ..kube.errors import call
from . import registry


def served_versions(api: client.ApiClient) -> set[str]:
    """{"group/version", ...} the API server serves (all versions of every group, plus "v1").

    Raises kube.errors.TransientKubeError / TerminalKubeError as `kube.errors.call` classifies the failure.
    """
    groups = call(client.ApisApi(api).get_api_versions)
    served = {"v1"}
    for group in groups.groups or []:
        for version in group.versions or []:
            served.add(version.group_version)
    return served


def available_backends(served: set[str]) -> list[str]:
    """Registry names of every plugin whose API the cluster serves, e.g. ["kai-v2alpha2", ...]."""
    return sorted(cls.name for cls in registry.all_plugins() if cls.available(served))
