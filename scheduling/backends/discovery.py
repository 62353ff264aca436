"""API discovery: which group/versions a cluster serves, and which backend plugins it can therefore run.

One request (`GET /apis`, the aggregated group list) gives every served "group/version"; the core group adds
"v1". `registry.select(family, served)` then picks the highest version a family's plugins need.
"""
from __future__ import annotations

import re

from kubernetes import client

from ..kube.client import REQUEST_TIMEOUT
from ..kube.errors import call
from . import registry

# A served "group/version" (DNS-subdomain group, Kubernetes version name); anything else in an answer is dropped,
# so a server that is not an API server cannot write free text into the cluster's served-API list.
GROUP_VERSION = re.compile(r"^([a-z0-9]([a-z0-9.-]{0,251}[a-z0-9])?/)?v[0-9]+((alpha|beta)[0-9]+)?$")
MAX_SERVED = 2000


def served_versions(api: client.ApiClient) -> set[str]:
    """{"group/version", ...} the API server serves (all versions of every group, plus "v1"); entries that are no
    group/version are dropped, and at most MAX_SERVED are kept.

    Raises kube.errors.TransientKubeError / TerminalKubeError as `kube.errors.call` classifies the failure.
    """
    groups = call(client.ApisApi(api).get_api_versions, _request_timeout=REQUEST_TIMEOUT)  # a stalled server: bounded
    served = {"v1"}
    for group in groups.groups or []:
        for version in group.versions or []:
            if isinstance(version.group_version, str) and GROUP_VERSION.match(version.group_version):
                served.add(version.group_version)
            if len(served) >= MAX_SERVED:
                return served
    return served


def available_backends(served: set[str]) -> list[str]:
    """Registry names of every plugin whose API the cluster serves, e.g. ["kai-v2alpha2", ...]."""
    return sorted(cls.name for cls in registry.all_plugins() if cls.available(served))
