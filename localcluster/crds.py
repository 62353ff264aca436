"""The third-party scheduler CRDs a local cluster serves, shipped as YAML in ``localcluster/crds/``.

The CRDs are authored in this repository from the upstream API types (``docs/upstream.md``: one section per
scheduler): KAI Queue, PodGroup and Topology; scheduler-plugins PodGroup; Volcano PodGroup and Queue.
No scheduler runs for them; the API server validates, stores and serves them, so gangweb's backends can create and
read the objects, write their status as the real schedulers would, and meet real 409s and 422s.
"""

from __future__ import annotations

import time
from pathlib import Path

import yaml
from kubernetes import client
from kubernetes.client.rest import ApiException

CRDS_DIR = Path(__file__).resolve().parent / "crds"


def load_crds(directory: Path = CRDS_DIR) -> list[dict]:
    """Return every CustomResourceDefinition in ``directory/*.yaml``, in file-name order."""
    crds: list[dict] = []
    for path in sorted(directory.glob("*.yaml")):
        crds.extend(doc for doc in yaml.safe_load_all(path.read_text()) if doc)
    return crds


def _established(crd: client.V1CustomResourceDefinition) -> bool:
    conditions = (crd.status and crd.status.conditions) or []
    return any(c.type == "Established" and c.status == "True" for c in conditions)


def install_crds(api: client.ApiClient, crds: list[dict] | None = None, timeout: float = 60.0) -> list[str]:
    """Create (or replace, when already there) the CRDs and wait until each is Established; return their names.

    Raises `ApiException` if the API server rejects a definition, TimeoutError if one is not Established in time.
    """
    ext = client.ApiextensionsV1Api(api)
    names = []
    for crd in crds if crds is not None else load_crds():
        name = crd["metadata"]["name"]
        names.append(name)
        try:
            ext.create_custom_resource_definition(crd)
        except ApiException as e:
            if e.status != 409:
                raise
            current = ext.read_custom_resource_definition(name)
            body = {**crd, "metadata": {**crd["metadata"], "resourceVersion": current.metadata.resource_version}}
            ext.replace_custom_resource_definition(name, body)
    wait_established(api, names, timeout)
    return names


def wait_established(api: client.ApiClient, names: list[str], timeout: float = 60.0) -> None:
    """Block until every CRD in ``names`` has condition Established=True; TimeoutError otherwise."""
    ext = client.ApiextensionsV1Api(api)
    deadline = time.monotonic() + timeout
    pending = list(names)
    while pending:
        pending = [n for n in pending if not _established(ext.read_custom_resource_definition(n))]
        if not pending:
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"CRDs not Established after {timeout:.0f}s: {', '.join(pending)}")
        time.sleep(0.2)
