"""The admin kubeconfig of a local cluster, and API clients built from it."""

from __future__ import annotations

import base64
import ssl
from pathlib import Path

import yaml
from kubernetes import client, config

from .pki import PKIPaths

CONTEXT_NAME = "gangweb-local"


def _b64(path: Path) -> str:
    return base64.b64encode(path.read_bytes()).decode("ascii")


def write_kubeconfig(path: Path, server: str, pki: PKIPaths) -> Path:
    """Write an admin kubeconfig for ``server`` (``https://127.0.0.1:<port>``) and return its path.

    Certificates and the key are embedded (``*-data`` fields), so the file is self-contained: gangweb can store
    its content as a cluster's credentials, and it keeps working if the PKI directory is moved.
    """
    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": CONTEXT_NAME,
                "cluster": {"server": server, "certificate-authority-data": _b64(pki.ca_cert)},
            }
        ],
        "users": [
            {
                "name": CONTEXT_NAME,
                "user": {
                    "client-certificate-data": _b64(pki.admin_cert),
                    "client-key-data": _b64(pki.admin_key),
                },
            }
        ],
        "contexts": [{"name": CONTEXT_NAME, "context": {"cluster": CONTEXT_NAME, "user": CONTEXT_NAME}}],
        "current-context": CONTEXT_NAME,
    }
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    path.chmod(0o600)
    return path


def api_client(kubeconfig: Path | str) -> client.ApiClient:
    """Return a kubernetes `ApiClient` for the kubeconfig's current context (never the process-global default)."""
    configuration = client.Configuration()
    config.load_kube_config(config_file=str(kubeconfig), client_configuration=configuration)
    return client.ApiClient(configuration)


def admin_ssl_context(pki: PKIPaths) -> ssl.SSLContext:
    """Return an SSL context that trusts the cluster CA and presents the admin client certificate."""
    ctx = ssl.create_default_context(cafile=str(pki.ca_cert))
    ctx.load_cert_chain(str(pki.admin_cert), str(pki.admin_key))
    return ctx
