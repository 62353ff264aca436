"""An API client per cluster: from its stored kubeconfig (+ context) or the pod's service account.

The kubeconfig is validated again here (`kubeconfig_policy.validate`), whatever path it was stored by (rows from
before the rules, the Django admin, a direct database write), and the connection is built from the validated
data only: the client library's `KubeConfigLoader` is never used, so nothing in a kubeconfig can run a command,
read a file or pick another server to talk to (issue 15, C1/H1). The server's addresses are resolved and checked
(`scheduling.security.addresses`, the install's `GANGWEB_ALLOW_PRIVATE_CLUSTER_ADDRESSES`), and the client connects to
the checked address itself (pinned: the host name is kept for TLS SNI and certificate verification), so a DNS answer
that changes after the check (rebinding) is never used. Certificates are handed to OpenSSL from memory (CA) or
from a private temporary file deleted as soon as it is loaded (client certificate and key).

Clients are cached per process, keyed by the cluster's id and a hash of its connection settings, so editing a
cluster's kubeconfig takes effect on the next call without a restart; a cached client is rebuilt after
`PIN_SECONDS` so the host name is resolved (and checked) again. Requests time out (`REQUEST_TIMEOUT`) and
urllib3 retries once, so an unreachable cluster fails a reconcile pass in seconds instead of hanging a worker; a
redirect is never followed (issue 32 row 1: it would take the request past the address rules) and is reported
as `errors.REDIRECTED`.
Every request first takes a token of the cluster's client rate limit (QPS/burst, `throttle`).
"""
from __future__ import annotations

import hashlib
import os
import ssl
import tempfile
import threading
import time

import urllib3
from django.conf import settings
from kubernetes import client, config
from requests.utils import should_bypass_proxies

from ..security import addresses, outbound
from . import kubeconfig_policy, throttle
from .errors import CLUSTER_UNREACHABLE, TerminalKubeError, TransientKubeError

REQUEST_TIMEOUT = (5, 30)  # (connect, read) seconds, passed as _request_timeout
PIN_SECONDS = 300  # a cached client's checked address is trusted this long, then the name is resolved again
INVALID_KUBECONFIG = "InvalidKubeconfig"
ADDRESS_NOT_ALLOWED = "AddressNotAllowed"
_cache: dict[tuple[int, str], tuple[client.ApiClient, float]] = {}
_lock = threading.Lock()


def _fingerprint(cluster) -> str:
    policy = getattr(settings, "GANGWEB_ALLOW_PRIVATE_CLUSTER_ADDRESSES", "")
    limits = throttle.limits_for(cluster)  # a changed rate limit rebuilds the client with the new bucket
    raw = f"{cluster.in_cluster}\0{cluster.context}\0{cluster.kubeconfig}\0{policy}\0{limits}".encode()
    return hashlib.sha256(raw).hexdigest()


def _ssl_context(conn: kubeconfig_policy.Connection) -> ssl.SSLContext:
    """Verifying TLS context: the kubeconfig's CA (from memory) or the system's, plus the client certificate."""
    ctx = ssl.create_default_context(cadata=conn.ca_pem.decode("ascii")) if conn.ca_pem else (
        ssl.create_default_context())
    if conn.client_cert_pem and conn.client_key_pem:
        # OpenSSL loads a certificate chain only from files: a private directory, removed right after loading.
        with tempfile.TemporaryDirectory(prefix="gangweb-tls-") as folder:
            cert_path, key_path = os.path.join(folder, "cert.pem"), os.path.join(folder, "key.pem")
            for path, data in ((cert_path, conn.client_cert_pem), (key_path, conn.client_key_pem)):
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
                with os.fdopen(fd, "wb") as handle:
                    handle.write(data)
            ctx.load_cert_chain(cert_path, key_path)
    return ctx


def _pool_manager(conn: kubeconfig_policy.Connection, configuration: client.Configuration) -> urllib3.PoolManager:
    """A pinned pool manager (`scheduling.security.outbound`: the socket goes to the checked IP in the URL, SNI and the
    certificate check use the server's host name or tls-server-name, no redirect is ever followed) that verifies
    TLS with `conn`'s CA and presents its client certificate. The install's own proxy environment (HTTPS_PROXY /
    NO_PROXY, read by `client.Configuration`) still applies."""
    proxy = None
    if configuration.proxy and not should_bypass_proxies(configuration.host, no_proxy=configuration.no_proxy or ""):
        proxy = configuration.proxy
    return outbound.pool_manager(server_name=outbound.server_name_for(conn.host, conn.tls_server_name),
                                 ssl_context=_ssl_context(conn), retries=configuration.retries,
                                 maxsize=configuration.connection_pool_maxsize or 4, proxy=proxy,
                                 proxy_headers=configuration.proxy_headers)


def connection_for(cluster) -> tuple[kubeconfig_policy.Connection, str]:
    """The validated Connection of `cluster`'s kubeconfig and the checked address to connect to.

    Raises TerminalKubeError InvalidKubeconfig (a rule broken: the message names the field) or AddressNotAllowed
    (the server is on an address this install refuses), TransientKubeError ClusterUnreachable when the host name
    does not resolve now.
    """
    try:
        conn = kubeconfig_policy.validate(cluster.kubeconfig or "", cluster.context or "")
    except kubeconfig_policy.KubeconfigRefused as exc:
        raise TerminalKubeError(INVALID_KUBECONFIG, f"cluster {cluster.name}: {exc}") from None
    try:
        checked = kubeconfig_policy.resolve_server(conn)
    except addresses.AddressRefused as exc:
        raise TerminalKubeError(ADDRESS_NOT_ALLOWED, f"cluster {cluster.name}: server {exc}") from None
    except OSError:
        raise TransientKubeError(CLUSTER_UNREACHABLE, f"cluster {cluster.name}: cannot resolve the server's host "
                                                      f"name {conn.host}") from None
    return conn, checked[0]


def build_client(cluster) -> client.ApiClient:
    """A new ApiClient for `cluster` (a scheduling.models.Cluster), built from validated data only (module
    docstring). Raises what `connection_for` raises; in-cluster clusters use gangweb's own service account
    (`load_incluster_config`, the platform's choice: only platform admins may set `in_cluster`)."""
    configuration = client.Configuration()
    configuration.retries = 1
    # Connections kept per host: at least what one worker process can have in flight to a cluster (a bulk batch's
    # threads and its fan-out pool, reconcile/jobs/fanout.py, plus two), else urllib3 opens and drops extra
    # connections (a TLS handshake each). The client's default is 5 per CPU.
    configuration.connection_pool_maxsize = max(configuration.connection_pool_maxsize or 0,
                                                2 * settings.GANGWEB_RECONCILE_THREADS + 2)
    if cluster.in_cluster:
        try:
            config.load_incluster_config(client_configuration=configuration)
        except config.ConfigException as exc:
            raise TerminalKubeError(INVALID_KUBECONFIG, f"cluster {cluster.name}: not running in a cluster "
                                                        f"({exc})") from None
        api = client.ApiClient(configuration)
        default_pools = api.rest_client.pool_manager
        api.rest_client.pool_manager = outbound.without_redirects(default_pools)  # the platform's own server too
        default_pools.clear()
        throttle.limit(api, cluster)
        return api
    conn, address = connection_for(cluster)
    configuration.host = outbound.pinned_url("https", address, conn.port, conn.path)
    configuration.verify_ssl = True
    if conn.token:
        configuration.api_key = {"authorization": f"Bearer {conn.token}"}
    api = client.ApiClient(configuration)
    default_pools = api.rest_client.pool_manager
    api.rest_client.pool_manager = _pool_manager(conn, configuration)
    default_pools.clear()
    throttle.limit(api, cluster)
    return api


def api_client(cluster) -> client.ApiClient:
    """The cached ApiClient for `cluster` (built on first use, whenever its connection settings change, and
    again after PIN_SECONDS so its server's name is resolved and checked anew). Built outside the lock: a name
    that is slow to resolve delays only its own cluster's callers."""
    key = (cluster.pk, _fingerprint(cluster))
    with _lock:
        cached = _cache.get(key)
        if cached is not None and time.monotonic() - cached[1] <= PIN_SECONDS:
            return cached[0]
    built = build_client(cluster)
    with _lock:
        cached = _cache.get(key)
        if cached is not None and time.monotonic() - cached[1] <= PIN_SECONDS:
            built.close()  # another thread built one meanwhile: keep a single client per cluster
            return cached[0]
        for old in [k for k in _cache if k[0] == cluster.pk]:
            _cache.pop(old)[0].close()
        _cache[key] = (built, time.monotonic())
        return built


def forget(cluster_pk: int | None = None) -> None:
    """Drop cached clients (of one cluster, or all); tests and the cluster editor call this."""
    with _lock:
        for key in [k for k in _cache if cluster_pk is None or k[0] == cluster_pk]:
            _cache.pop(key)[0].close()
