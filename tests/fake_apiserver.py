"""A recording HTTPS server standing in for a cluster's API server (or an internal service a kubeconfig points
at), for the kubeconfig trust tests (issue 15: C1, H1, M1, M2, L1).

`RecordingServer(answers)` listens on 127.0.0.1 (a free port) with a self-signed certificate made here with
`cryptography` (subject alternative names 127.0.0.1 and localhost), records every request (method, path, headers
with lower-case names) in `requests`, and answers each path from `answers` ({path: (status, body dict or text)});
unknown paths get 404 with a text body. A PATCH is recorded with its JSON body and answered 200 `{}`.
`kubeconfig(...)` writes a kubeconfig for it that trusts its certificate. An answer may carry headers as a third
item (`(307, "", {"Location": ...})`); `fallback` answers every path not in `answers`; POST and PUT are recorded
with their body and answered like GET. `host` picks the loopback address to listen on (127.0.0.1 by default) and
`tls=False` makes it plain HTTP (an internal service that a redirect could aim at).
"""
from __future__ import annotations

import base64
import datetime
import ipaddress
import json
import ssl
import tempfile
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

VERSION = {"major": "1", "minor": "36", "gitVersion": "v1.36.3", "gitCommit": "0" * 40, "gitTreeState": "clean",
           "buildDate": "2026-01-01T00:00:00Z", "goVersion": "go1.25", "compiler": "gc", "platform": "linux/amd64"}
APIS = {"kind": "APIGroupList", "apiVersion": "v1", "groups": [
    {"name": "batch", "versions": [{"groupVersion": "batch/v1", "version": "v1"}],
     "preferredVersion": {"groupVersion": "batch/v1", "version": "v1"}}]}
KUBERNETES = {"/version": (200, VERSION), "/apis": (200, APIS)}


def self_signed(names=("localhost",), ips=("127.0.0.1",)) -> tuple[bytes, bytes]:
    """(certificate PEM, key PEM) of a self-signed server certificate for `names` and `ips`."""
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "recording-apiserver")])
    now = datetime.datetime.now(datetime.UTC)
    sans = [x509.DNSName(n) for n in names] + [x509.IPAddress(ipaddress.ip_address(i)) for i in ips]
    cert = (x509.CertificateBuilder().subject_name(subject).issuer_name(subject).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(hours=1))
            .add_extension(x509.SubjectAlternativeName(sans), critical=False)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(key, hashes.SHA256()))
    return (cert.public_bytes(serialization.Encoding.PEM),
            key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                              serialization.NoEncryption()))


class RecordingServer:
    """A TLS server on 127.0.0.1 that records requests; use as a context manager (started on enter)."""

    def __init__(self, answers: dict | None = None, client_ca_pem: bytes | None = None, *, host: str = "127.0.0.1",
                 tls: bool = True, fallback: tuple = (404, "no such path"), writes: tuple | None = None):
        """`client_ca_pem`: require a client certificate issued by (or equal to) this certificate. `writes`: the
        answer to every POST and PUT whatever the path (else they are answered as a GET of the path)."""
        self.answers = dict(KUBERNETES if answers is None else answers)
        self.host, self.tls, self.fallback, self.writes = host, tls, fallback, writes
        self.requests: list[dict] = []
        self.cert_pem, key_pem = self_signed()
        self._dir = tempfile.TemporaryDirectory()
        cert_path, key_path = Path(self._dir.name, "cert.pem"), Path(self._dir.name, "key.pem")
        cert_path.write_bytes(self.cert_pem)
        key_path.write_bytes(key_pem)
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(cert_path, key_path)
        if client_ca_pem:
            context.verify_mode = ssl.CERT_REQUIRED
            context.load_verify_locations(cadata=client_ca_pem.decode())
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # quiet
                pass

            def do_GET(self, body_sent=None):
                headers = {k.lower(): v for k, v in self.headers.items()}
                peer = self.connection.getpeercert() if client_ca_pem else None
                server.requests.append({"method": self.command, "path": self.path, "headers": headers, "peer": peer,
                                        "body": body_sent})
                path = self.path.split("?", 1)[0]
                answer = server.answers.get(path, server.answers.get(path.rstrip("/"), server.fallback))
                if body_sent is not None and server.writes is not None:
                    answer = server.writes
                status, body, *extra = answer
                data = json.dumps(body).encode() if isinstance(body, (dict, list)) else str(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json" if isinstance(body, (dict, list))
                                 else "text/plain")
                for name, value in (extra[0] if extra else {}).items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_POST(self):
                """Recorded with its body (text) and answered as a GET of the path would be."""
                self.do_GET(self.rfile.read(int(self.headers.get("Content-Length") or 0)).decode("utf-8", "replace"))

            do_PUT = do_POST

            def do_PATCH(self):
                """Recorded with its body (JSON) and answered 200 with an empty object, whatever the path."""
                headers = {k.lower(): v for k, v in self.headers.items()}
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"null")
                server.requests.append({"method": "PATCH", "path": self.path, "headers": headers, "body": body})
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"{}")

        self.httpd = ThreadingHTTPServer((host, 0), Handler)
        if tls:
            self.httpd.socket = context.wrap_socket(self.httpd.socket, server_side=True)
        self.port = self.httpd.server_address[1]
        self._thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self) -> RecordingServer:
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()
        self._dir.cleanup()

    @property
    def url(self) -> str:
        return f"{'https' if self.tls else 'http'}://{self.host}:{self.port}"

    def kubeconfig(self, user: dict | None = None, server: str | None = None, cluster_extra: dict | None = None) -> str:
        """A kubeconfig for this server (CA = its certificate) with `user` as the user entry (default a token)."""
        cluster = {"server": server or self.url,
                   "certificate-authority-data": base64.b64encode(self.cert_pem).decode()}
        cluster.update(cluster_extra or {})
        return kubeconfig(cluster, user if user is not None else {"token": "recorded-token"})


def kubeconfig(cluster: dict, user: dict) -> str:
    """A one-context kubeconfig of `cluster` and `user` (YAML text)."""
    return yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "ctx",
        "clusters": [{"name": "c", "cluster": cluster}], "users": [{"name": "u", "user": user}],
        "contexts": [{"name": "ctx", "context": {"cluster": "c", "user": "u"}}]}, sort_keys=False)
