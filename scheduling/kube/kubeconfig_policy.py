"""Kubeconfigs are data, never code or file paths: the one validator of a cluster's stored kubeconfig.

A kubeconfig is written by a cluster admin, who is not trusted with gangweb's server. The client library's loader
(`kubernetes.config.kube_config.KubeConfigLoader`) would run `users[].user.exec` commands and `auth-provider`
`cmd-path`s, read `tokenFile` and every `*-file`/path field, contact OIDC issuers and proxies: each of those lets
the kubeconfig's author run code as gangweb or read its files (issue 15, C1 and H1). So the kubeconfig is checked
here against an allow-list, and the client factory (`scheduling.kube.client`) builds its connection from the
`Connection` this module returns, never through the loader.

Allowed (kubeconfig v1, https://kubernetes.io/docs/reference/config-api/kubeconfig.v1/):
- top level: apiVersion, kind, clusters, users, contexts, current-context, preferences, extensions;
- `clusters[].cluster`: server (https only), certificate-authority-data, tls-server-name, disable-compression,
  extensions, and insecure-skip-tls-verify only when false;
- `users[].user`: token (inline; whitespace at its ends is dropped, as kubectl does with a token file's trailing
  newline), client-certificate-data, client-key-data, extensions;
- `contexts[].context`: cluster, user, namespace, extensions.

Refused, with the path of the field (`kubeconfig.users[0].user.exec`): exec, auth-provider, tokenFile, the path
fields client-certificate, client-key and certificate-authority, username/password, impersonation (as,
as-groups, as-uid, as-user-extra), proxy-url, insecure-skip-tls-verify: true, and any key not listed above. File
paths are refused by their field name, never opened, so a present and a missing file answer the same.

The YAML is parsed with caps (MAX_KUBECONFIG_BYTES, MAX_DEPTH, no aliases), and the `*-data` fields must be
base64 PEM that parses (certificates with `cryptography`, an unencrypted private key). Every entry of the document
is checked, not only the one the chosen context uses: what is stored is data all through.

The server's addresses are checked by `scheduling.security.addresses` (see `resolve_server`).
"""
from __future__ import annotations

import base64
import binascii
import re
from dataclasses import dataclass
from urllib.parse import urlsplit

import yaml
from cryptography import x509
from cryptography.hazmat.primitives import serialization

from ..security import addresses

MAX_KUBECONFIG_BYTES = 256 * 1024
MAX_DEPTH = 20
FIELD = "kubeconfig"

TOP_KEYS = {"apiVersion", "kind", "clusters", "users", "contexts", "current-context", "preferences", "extensions"}
CLUSTER_KEYS = {"server", "certificate-authority-data", "tls-server-name", "disable-compression", "extensions",
                "insecure-skip-tls-verify"}
USER_KEYS = {"token", "client-certificate-data", "client-key-data", "extensions"}
CONTEXT_KEYS = {"cluster", "user", "namespace", "extensions"}

# Why each known-but-refused field is refused: the 400 says it.
REFUSED = {
    "exec": "exec plugins run a command on gangweb's servers; paste a token (e.g. a service account token) or "
            "client-certificate-data and client-key-data instead",
    "auth-provider": "auth providers run commands (cmd-path) or contact other servers (OIDC issuers); paste a "
                     "token or client-certificate-data and client-key-data instead",
    "tokenFile": "is a file on gangweb's servers; paste the token itself as `token`",
    "client-certificate": "is a file on gangweb's servers; give its content base64-encoded as "
                          "client-certificate-data",
    "client-key": "is a file on gangweb's servers; give its content base64-encoded as client-key-data",
    "certificate-authority": "is a file on gangweb's servers; give its content base64-encoded as "
                             "certificate-authority-data",
    "username": "basic authentication is not supported; use a token or a client certificate",
    "password": "basic authentication is not supported; use a token or a client certificate",
    "as": "impersonation is not supported; give the credentials of the identity gangweb should use",
    "as-groups": "impersonation is not supported; give the credentials of the identity gangweb should use",
    "as-uid": "impersonation is not supported; give the credentials of the identity gangweb should use",
    "as-user-extra": "impersonation is not supported; give the credentials of the identity gangweb should use",
    "proxy-url": "a kubeconfig may not choose a proxy (gangweb would connect wherever it points); the install's "
                 "own proxy settings apply",
}
HOST_NAME = re.compile(r"^(?=.{1,253}$)([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)(\.[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)*$")
TOKEN_CHARS = re.compile(r"^[\x21-\x7e]+$")  # visible ASCII: what an HTTP header value may carry unquoted


class KubeconfigRefused(ValueError):
    """The kubeconfig breaks a rule. `field` is the path of the offending field ("kubeconfig.users[0].user.exec",
    or "context" for the cluster's context name), `message` what is wrong; neither ever holds a secret."""

    def __init__(self, field: str, message: str):
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


@dataclass(frozen=True)
class Connection:
    """What gangweb needs to reach a cluster, taken from a validated kubeconfig.

    `host` is the server's host name or IP literal (no brackets), `port` its port (443 by default), `path` the
    server URL's path prefix ("" or "/k8s/clusters/c-1"). PEM fields are re-serialized from what `cryptography`
    parsed: `ca_pem` (None: the system's trusted CAs), `client_cert_pem` + `client_key_pem` (both or neither).
    `token` is the bearer token without surrounding whitespace, or None. `server_field` is the path of the server
    field ("kubeconfig.clusters[0].cluster.server"), for errors about its address.
    """

    context: str
    server_field: str
    server: str
    host: str
    port: int
    path: str
    tls_server_name: str | None
    ca_pem: bytes | None
    client_cert_pem: bytes | None
    client_key_pem: bytes | None
    token: str | None

    def __repr__(self) -> str:  # never print credentials by accident (logs, tracebacks)
        return f"Connection(context={self.context!r}, server={self.server!r})"


def _refuse(path: str, message: str):
    raise KubeconfigRefused(path, message)


def _key_text(key) -> str:
    return str(key)[:60]


def parse(text: str) -> dict:
    """The kubeconfig document of `text`, parsed as YAML with caps: at most MAX_KUBECONFIG_BYTES, nesting at most
    MAX_DEPTH, no aliases/anchors. Raises KubeconfigRefused("kubeconfig", ...) otherwise or when it is not a
    mapping."""
    if not isinstance(text, str) or not text.strip():
        _refuse(FIELD, "is empty")
    if len(text.encode("utf-8", "surrogatepass")) > MAX_KUBECONFIG_BYTES:
        _refuse(FIELD, f"is larger than {MAX_KUBECONFIG_BYTES} bytes")
    depth = 0
    try:
        for event in yaml.parse(text, Loader=yaml.SafeLoader):
            if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None):
                _refuse(FIELD, "uses YAML anchors or aliases; write the values out")
            if isinstance(event, (yaml.MappingStartEvent, yaml.SequenceStartEvent)):
                depth += 1
                if depth > MAX_DEPTH:
                    _refuse(FIELD, f"is nested more than {MAX_DEPTH} levels deep")
            elif isinstance(event, (yaml.MappingEndEvent, yaml.SequenceEndEvent)):
                depth -= 1
        doc = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark is not None else ""
        _refuse(FIELD, f"is not valid YAML{where}")
    if not isinstance(doc, dict):
        _refuse(FIELD, "is not a YAML mapping (a kubeconfig starts with apiVersion: v1, kind: Config)")
    return doc


def _check_keys(entry: dict, allowed: set[str], path: str) -> None:
    for key in entry:
        if key in REFUSED:
            _refuse(f"{path}.{key}", REFUSED[key])
        if key not in allowed:
            _refuse(f"{path}.{_key_text(key)}", "unknown field; allowed: " + ", ".join(sorted(allowed)))


def _named_entries(doc: dict, list_key: str, item_key: str, allowed: set[str]) -> dict[str, tuple[str, dict]]:
    """{name: (path, body)} of `doc[list_key]` (e.g. clusters -> cluster), each body checked against `allowed`."""
    items = doc.get(list_key)
    if items is None:
        return {}
    if not isinstance(items, list):
        _refuse(f"{FIELD}.{list_key}", "must be a list")
    out = {}
    for i, item in enumerate(items):
        path = f"{FIELD}.{list_key}[{i}]"
        if not isinstance(item, dict):
            _refuse(path, "must be a mapping with name and " + item_key)
        for key in item:
            if key not in ("name", item_key):
                _refuse(f"{path}.{_key_text(key)}", f"unknown field; allowed: name, {item_key}")
        name = item.get("name")
        if not isinstance(name, str) or not name:
            _refuse(f"{path}.name", "must be a non-empty string")
        if name in out:
            _refuse(f"{path}.name", f"'{name[:100]}' is used twice")
        body = item.get(item_key) or {}
        if not isinstance(body, dict):
            _refuse(f"{path}.{item_key}", "must be a mapping")
        _check_keys(body, allowed, f"{path}.{item_key}")
        out[name] = (f"{path}.{item_key}", body)
    return out


def _pem_data(value, path: str) -> bytes:
    if not isinstance(value, str) or not value.strip():
        _refuse(path, "must be a non-empty base64 string")
    try:
        return base64.b64decode("".join(value.split()), validate=True)
    except (binascii.Error, ValueError):
        _refuse(path, "is not valid base64")


def _certificates(value, path: str) -> bytes:
    try:
        certs = x509.load_pem_x509_certificates(_pem_data(value, path))
    except ValueError:
        _refuse(path, "is not base64-encoded PEM certificates")
    return b"".join(cert.public_bytes(serialization.Encoding.PEM) for cert in certs)


def _private_key(value, path: str) -> bytes:
    try:
        key = serialization.load_pem_private_key(_pem_data(value, path), password=None)
    except (ValueError, TypeError) as exc:
        _refuse(path, "is not a base64-encoded, unencrypted PEM private key" if not isinstance(exc, TypeError)
                else "is an encrypted private key; give it unencrypted")
    except Exception:  # noqa: BLE001 - cryptography's UnsupportedAlgorithm and friends: still bad data
        _refuse(path, "is not a private key gangweb can use")
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def _server(cluster: dict, path: str) -> tuple[str, str, int, str]:
    server = cluster.get("server")
    where = f"{path}.server"
    if not isinstance(server, str) or not server.strip():
        _refuse(where, "is required (https://host:port)")
    try:
        parts = urlsplit(server.strip())
        port = parts.port or 443
    except ValueError:
        _refuse(where, "is not a valid URL")
    if parts.scheme != "https":
        _refuse(where, "must be an https:// URL")
    if parts.username is not None or parts.password is not None:
        _refuse(where, "must not carry a user name or password")
    if parts.query or parts.fragment:
        _refuse(where, "must not have a query or fragment")
    host = (parts.hostname or "").strip()
    if not host:
        _refuse(where, "has no host")
    if not addresses.is_ip_literal(host) and not HOST_NAME.match(host):
        _refuse(where, "has an invalid host name")
    return server.strip(), host, port, parts.path.rstrip("/")


def _check_cluster(body: dict, path: str) -> None:
    _server(body, path)
    skip = body.get("insecure-skip-tls-verify")
    if skip not in (None, False):
        _refuse(f"{path}.insecure-skip-tls-verify", "skipping TLS verification is not allowed (anyone on the way "
                "could read the credentials); give the cluster's CA as certificate-authority-data")
    if "certificate-authority-data" in body:
        _certificates(body["certificate-authority-data"], f"{path}.certificate-authority-data")
    name = body.get("tls-server-name")
    if name is not None and (not isinstance(name, str) or not HOST_NAME.match(name.lower())):
        _refuse(f"{path}.tls-server-name", "must be a DNS name")


def _token(value, path: str) -> str:
    if not isinstance(value, str):
        _refuse(path, "must be a string")
    token = value.strip()
    if not token:
        _refuse(path, "is empty")
    if not TOKEN_CHARS.match(token):
        _refuse(path, "contains whitespace or control characters inside it")
    return token


def _check_user(body: dict, path: str) -> None:
    if "token" in body:
        _token(body["token"], f"{path}.token")
    has_cert, has_key = "client-certificate-data" in body, "client-key-data" in body
    if has_cert != has_key:
        missing = "client-key-data" if has_cert else "client-certificate-data"
        _refuse(f"{path}.{missing}", "is required with " + ("client-certificate-data" if has_cert
                                                              else "client-key-data"))
    if has_cert:
        _certificates(body["client-certificate-data"], f"{path}.client-certificate-data")
        _private_key(body["client-key-data"], f"{path}.client-key-data")


def validate(text: str, context: str = "") -> Connection:
    """Check the whole kubeconfig `text` against the rules (module docstring) and return the Connection of
    `context` (the cluster's context; "" = the kubeconfig's current-context).

    Raises KubeconfigRefused naming the offending field. Opens no file, runs nothing, contacts nothing.
    """
    doc = parse(text)
    _check_keys(doc, TOP_KEYS, FIELD)
    for key, expected in (("apiVersion", "v1"), ("kind", "Config")):
        if key in doc and doc[key] != expected:
            _refuse(f"{FIELD}.{key}", f"must be {expected}")
    for key in ("preferences", "extensions"):
        if key in doc and not isinstance(doc[key], (dict, list, type(None))):
            _refuse(f"{FIELD}.{key}", "must be a mapping or list")
    clusters = _named_entries(doc, "clusters", "cluster", CLUSTER_KEYS)
    users = _named_entries(doc, "users", "user", USER_KEYS)
    contexts = _named_entries(doc, "contexts", "context", CONTEXT_KEYS)
    for path, body in clusters.values():
        _check_cluster(body, path)
    for path, body in users.values():
        _check_user(body, path)
    for path, body in contexts.values():
        for key in ("cluster", "user", "namespace"):
            if key in body and not isinstance(body[key], str):
                _refuse(f"{path}.{key}", "must be a string")
        if body.get("cluster") not in clusters:
            _refuse(f"{path}.cluster", f"names no cluster of this kubeconfig: '{str(body.get('cluster'))[:100]}'")
        if body.get("user") and body["user"] not in users:
            _refuse(f"{path}.user", f"names no user of this kubeconfig: '{body['user'][:100]}'")

    name = context or doc.get("current-context") or ""
    if not isinstance(name, str) or not name:
        _refuse(FIELD + ".current-context", "is not set; set it or choose a context")
    if name not in contexts:
        _refuse("context" if context else FIELD + ".current-context", f"no context named '{name[:100]}' in the "
                "kubeconfig")
    _, ctx = contexts[name]
    cluster_path, cluster = clusters[ctx["cluster"]]
    user = users[ctx["user"]][1] if ctx.get("user") else {}
    user_path = users[ctx["user"]][0] if ctx.get("user") else ""
    server, host, port, prefix = _server(cluster, cluster_path)
    return Connection(
        context=name, server_field=f"{cluster_path}.server", server=server, host=host, port=port, path=prefix,
        tls_server_name=cluster.get("tls-server-name") or None,
        ca_pem=(_certificates(cluster["certificate-authority-data"], f"{cluster_path}.certificate-authority-data")
                if "certificate-authority-data" in cluster else None),
        client_cert_pem=(_certificates(user["client-certificate-data"], f"{user_path}.client-certificate-data")
                         if "client-certificate-data" in user else None),
        client_key_pem=(_private_key(user["client-key-data"], f"{user_path}.client-key-data")
                        if "client-key-data" in user else None),
        token=_token(user["token"], f"{user_path}.token") if "token" in user else None,
    )


def resolve_server(connection: Connection, policy: addresses.AddressPolicy | None = None) -> list[str]:
    """The checked addresses of `connection`'s server (`scheduling.security.addresses.resolve` under `policy`, default
    the install's cluster policy). Raises addresses.AddressRefused, or OSError when the name does not resolve."""
    return addresses.resolve(connection.host, connection.port, policy or addresses.cluster_policy())
