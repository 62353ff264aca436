"""A mutating admission webhook that rewrites one field of gangweb's objects on every write, for the tests of a
repair that does not hold (hostile pass F5): what a cluster's own mutating admission policy may do to gangweb's
PodGroup.

`RewritingWebhook(api, namespace, ref, job_uid, path, value)` serves HTTPS on 127.0.0.1 (a free port, a self-signed
certificate: tests/fake_apiserver.py `self_signed`) and registers a MutatingWebhookConfiguration for CREATE and
UPDATE of `ref` in `namespace`, for objects labelled `gangweb.io/job-uid=<job_uid>` only, answering each with a JSON
patch that sets `path` (a JSON pointer, e.g. "/spec/schedulingPolicy/gang/minCount") to `value`; a labelled
ConfigMap gets `data.rewritten` instead (`probe`). `rewritten` counts the objects of `ref` it rewrote. Use as a
context manager: the configuration is deleted and the server stopped on exit.
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


class RewritingWebhook:
    """See the module docstring."""

    def __init__(self, api, namespace: str, ref, job_uid: str, path: str, value):
        self.api, self.namespace, self.ref, self.job_uid = api, namespace, ref, job_uid
        self.path, self.value = path, value
        self.rewritten = 0
        self.name = f"rewrite-{uuid.uuid4().hex[:8]}"
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
                if (request.get("kind") or {}).get("kind") == "ConfigMap":
                    ops = [{"op": "add", "path": "/data", "value": {"rewritten": "yes"}}]
                else:
                    hook.rewritten += 1
                    ops = [{"op": "replace", "path": hook.path, "value": hook.value}]
                response = {"uid": request.get("uid", ""), "allowed": True, "patchType": "JSONPatch",
                            "patch": base64.b64encode(json.dumps(ops).encode()).decode()}
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

    def __enter__(self) -> RewritingWebhook:
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        group, version = self.ref.api_version.split("/") if "/" in self.ref.api_version else ("", self.ref.api_version)
        client.AdmissionregistrationV1Api(self.api).create_mutating_webhook_configuration({
            "metadata": {"name": self.name},
            "webhooks": [{
                "name": f"{self.name}.gangweb.test",
                "clientConfig": {"url": f"https://127.0.0.1:{self.port}/mutate",
                                 "caBundle": base64.b64encode(self.cert_pem).decode()},
                "rules": [{"operations": ["CREATE", "UPDATE"], "apiGroups": [group], "apiVersions": [version],
                           "resources": [self.ref.plural], "scope": "Namespaced"},
                          {"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"],
                           "resources": ["configmaps"], "scope": "Namespaced"}],
                "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": self.namespace}},
                "objectSelector": {"matchLabels": {LABEL_JOB_UID: self.job_uid}},
                "sideEffects": "None", "admissionReviewVersions": ["v1"], "failurePolicy": "Fail",
                "reinvocationPolicy": "Never", "timeoutSeconds": 10,
            }],
        })
        return self

    def probe(self) -> bool:
        """True once the API server calls this webhook (its configuration takes a moment to reach the admission
        chain): a dry-run create of a ConfigMap labelled like the job's objects comes back rewritten."""
        body = {"metadata": {"name": "rewrite-probe", "labels": {LABEL_JOB_UID: self.job_uid}}}
        made = client.CoreV1Api(self.api).create_namespaced_config_map(self.namespace, body, dry_run="All")
        return (made.data or {}).get("rewritten") == "yes"

    def __exit__(self, *exc) -> None:
        try:
            client.AdmissionregistrationV1Api(self.api).delete_mutating_webhook_configuration(self.name)
        except ApiException as e:
            if e.status != 404:
                raise
        self.server.shutdown()
        self.server.server_close()
        self._dir.cleanup()
