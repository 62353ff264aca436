"""The HTTPS server and registration shared by the tests' admission webhooks (`mutating_webhook.RewritingWebhook`,
`throttling_webhook.ThrottlingWebhook`).

`AdmissionWebhook(api, namespace, ref, job_uid)` serves HTTPS on 127.0.0.1 (a free port, a self-signed certificate:
tests/fake_apiserver.py `self_signed`) and, as a context manager, registers a Mutating- or
ValidatingWebhookConfiguration (`mutating`) for `operations` of `ref` in `namespace` and for CREATE of ConfigMaps
there (the subclass's `probe` uses one), both only for objects labelled `gangweb.io/job-uid=<job_uid>`, with
failurePolicy Fail. Each AdmissionReview's `request` goes to the subclass's `answer`, which returns the review's
`response` (its `uid` is filled in here). On exit the configuration is deleted and the server stopped.
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


class AdmissionWebhook:
    """See the module docstring. Subclasses set `mutating`, `operations`, `name_prefix` and implement `answer`."""

    mutating = False
    operations: tuple[str, ...] = ("CREATE",)
    name_prefix = "hook"

    def __init__(self, api, namespace: str, ref, job_uid: str):
        self.api, self.namespace, self.ref, self.job_uid = api, namespace, ref, job_uid
        self.name = f"{self.name_prefix}-{uuid.uuid4().hex[:8]}"
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
                request = review.get("request") or {}
                response = {**hook.answer(request), "uid": request.get("uid", "")}
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

    def answer(self, request: dict) -> dict:
        """The AdmissionReview `response` for `request` (without `uid`)."""
        raise NotImplementedError

    def _api(self):
        return client.AdmissionregistrationV1Api(self.api)

    def __enter__(self):
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        group, version = self.ref.api_version.split("/") if "/" in self.ref.api_version else ("", self.ref.api_version)
        webhook = {
            "name": f"{self.name}.gangweb.test",
            "clientConfig": {"url": f"https://127.0.0.1:{self.port}/{'mutate' if self.mutating else 'validate'}",
                             "caBundle": base64.b64encode(self.cert_pem).decode()},
            "rules": [{"operations": list(self.operations), "apiGroups": [group], "apiVersions": [version],
                       "resources": [self.ref.plural], "scope": "Namespaced"},
                      {"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"],
                       "resources": ["configmaps"], "scope": "Namespaced"}],
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": self.namespace}},
            "objectSelector": {"matchLabels": {LABEL_JOB_UID: self.job_uid}},
            "sideEffects": "None", "admissionReviewVersions": ["v1"], "failurePolicy": "Fail", "timeoutSeconds": 10,
        }
        body = {"metadata": {"name": self.name}, "webhooks": [webhook]}
        if self.mutating:
            webhook["reinvocationPolicy"] = "Never"
            self._api().create_mutating_webhook_configuration(body)
        else:
            self._api().create_validating_webhook_configuration(body)
        return self

    def __exit__(self, *exc) -> None:
        try:
            if self.mutating:
                self._api().delete_mutating_webhook_configuration(self.name)
            else:
                self._api().delete_validating_webhook_configuration(self.name)
        except ApiException as e:
            if e.status != 404:
                raise
        self.server.shutdown()
        self.server.server_close()
        self._dir.cleanup()
