"""A mutating admission webhook that rewrites one field of gangweb's objects on every write, for the tests of a
repair that does not hold (hostile pass F5): what a cluster's own mutating admission policy may do to gangweb's
PodGroup.

`RewritingWebhook(api, namespace, ref, job_uid, path, value)` (server and registration: admission_webhook.py) is
called for CREATE and UPDATE of `ref` in `namespace`, for objects labelled `gangweb.io/job-uid=<job_uid>` only, and
answers each with a JSON patch that sets `path` (a JSON pointer, e.g. "/spec/schedulingPolicy/gang/minCount") to
`value`; a labelled ConfigMap gets `data.rewritten` instead (`probe`). `rewritten` counts the objects of `ref` it
rewrote. Use as a context manager.
"""
from __future__ import annotations

import base64
import json

from kubernetes import client

from scheduling.constants import LABEL_JOB_UID

from .admission_webhook import AdmissionWebhook


class RewritingWebhook(AdmissionWebhook):
    """See the module docstring."""

    mutating = True
    operations = ("CREATE", "UPDATE")
    name_prefix = "rewrite"

    def __init__(self, api, namespace: str, ref, job_uid: str, path: str, value):
        super().__init__(api, namespace, ref, job_uid)
        self.path, self.value = path, value
        self.rewritten = 0

    def answer(self, request: dict) -> dict:
        """A JSON patch setting `path` to `value` (a ConfigMap: `data.rewritten`)."""
        if (request.get("kind") or {}).get("kind") == "ConfigMap":
            ops = [{"op": "add", "path": "/data", "value": {"rewritten": "yes"}}]
        else:
            self.rewritten += 1
            ops = [{"op": "replace", "path": self.path, "value": self.value}]
        return {"allowed": True, "patchType": "JSONPatch", "patch": base64.b64encode(json.dumps(ops).encode()).decode()}

    def probe(self) -> bool:
        """True once the API server calls this webhook (its configuration takes a moment to reach the admission
        chain): a dry-run create of a ConfigMap labelled like the job's objects comes back rewritten."""
        body = {"metadata": {"name": "rewrite-probe", "labels": {LABEL_JOB_UID: self.job_uid}}}
        made = client.CoreV1Api(self.api).create_namespaced_config_map(self.namespace, body, dry_run="All")
        return (made.data or {}).get("rewritten") == "yes"
