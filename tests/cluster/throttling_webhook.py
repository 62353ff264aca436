"""A validating admission webhook that answers creates with 429 Too Many Requests, for the tests of a throttled
create against the real API server (issue 30, item 4).

`ThrottlingWebhook(api, namespace, ref, job_uid, retry_after=3)` serves HTTPS on 127.0.0.1 (a free port, a
self-signed certificate: tests/fake_apiserver.py `self_signed`) and registers a ValidatingWebhookConfiguration for
CREATE of `ref` in `namespace`, for objects labelled `gangweb.io/job-uid=<job_uid>` only (failurePolicy Fail). While
`throttling` is True it refuses each create (and each create of a ConfigMap so labelled: `probe`) with
`status.code` 429 and `details.retryAfterSeconds` (kube-apiserver answers the client with that code and sets
`Retry-After` from it: k8s.io/apiserver admission webhook `ToStatusErr`, responsewriters `ErrorNegotiated`); else
it allows. `refused` counts the refusals. Use as a context manager: the configuration is deleted and the server
stopped on exit.
"""
from __future__ import annotations

import base64
import json
import ssl
import tempfile
import threading
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from kubernetes import client
from kubernetes.client.rest import ApiException

from scheduling.constants import LABEL_JOB_UID
from tests.fake_apiserver import self_signed


class ThrottlingWebhook:
    """See the module docstring."""

    def __init__(self, api, namespace: str, ref, job_uid: str, retry_after: int = 3):
        self.api, self.namespace, self.ref, self.job_uid, self.retry_after = api, namespace, ref, job_uid, retry_after
        self.throttling = True
        self.refused = 0
        self.name = f"throttle-{uuid.uuid4().hex[:8]}"
        self.cert_pem, key_pem = self_signed()
        self._dir = tempfile.TemporaryDirectory()
        cert, key = Path(self._dir.name, "tls.crt"), Path(self._dir.name, "tls.key")
        cert.write_bytes(self.cert_pem)
        key.write_bytes(key_pem)
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(cert, key)
        hook = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802 - http.server's name
                review = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
                request_uid = (review.get("request") or {}).get("uid", "")
                response = {"uid": request_uid, "allowed": True}
                if hook.throttling:
                    hook.refused += 1
                    response = {"uid": request_uid, "allowed": False, "status": {
                        "code": 429, "reason": "TooManyRequests", "message": "throttled by the test's webhook",
                        "details": {"retryAfterSeconds": hook.retry_after}}}
                body = json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                                   "response": response}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):  # quiet
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.socket = context.wrap_socket(self.server.socket, server_side=True)
        self.port = self.server.server_address[1]

    def __enter__(self) -> ThrottlingWebhook:
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        group, version = (self.ref.api_version.split("/") + [""])[:2] if "/" in self.ref.api_version \
            else ("", self.ref.api_version)
        client.AdmissionregistrationV1Api(self.api).create_validating_webhook_configuration({
            "metadata": {"name": self.name},
            "webhooks": [{
                "name": f"{self.name}.gangweb.test",
                "clientConfig": {"url": f"https://127.0.0.1:{self.port}/validate",
                                 "caBundle": base64.b64encode(self.cert_pem).decode()},
                "rules": [{"operations": ["CREATE"], "apiGroups": [group], "apiVersions": [version],
                           "resources": [self.ref.plural], "scope": "Namespaced"},
                          # `probe`: a labelled ConfigMap's dry-run create tells when the API server calls the hook
                          {"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"],
                           "resources": ["configmaps"], "scope": "Namespaced"}],
                "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": self.namespace}},
                "objectSelector": {"matchLabels": {LABEL_JOB_UID: self.job_uid}},
                "sideEffects": "None", "admissionReviewVersions": ["v1"], "failurePolicy": "Fail",
                "timeoutSeconds": 10,
            }],
        })
        return self

    def probe(self) -> int:
        """The HTTP status of a dry-run create of a ConfigMap labelled like the job's objects: 429 once the API
        server calls this webhook (its configuration takes a moment to reach the admission chain)."""
        body = {"metadata": {"name": "throttle-probe", "labels": {LABEL_JOB_UID: self.job_uid}}}
        try:
            client.CoreV1Api(self.api).create_namespaced_config_map(self.namespace, body, dry_run="All")
        except ApiException as exc:
            return exc.status
        return 201

    def __exit__(self, *exc) -> None:
        try:
            client.AdmissionregistrationV1Api(self.api).delete_validating_webhook_configuration(self.name)
        except ApiException as e:
            if e.status != 404:
                raise
        self.server.shutdown()
        self.server.server_close()
        self._dir.cleanup()
