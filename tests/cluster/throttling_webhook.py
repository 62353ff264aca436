"""A validating admission webhook that answers creates with 429 Too Many Requests, for the tests of a throttled
create against the real API server (issue 30, item 4).

`ThrottlingWebhook(api, namespace, ref, job_uid, retry_after=3)` (server and registration: admission_webhook.py)
is a validating webhook for CREATE of `ref` in `namespace`, for objects labelled `gangweb.io/job-uid=<job_uid>`
only (failurePolicy Fail). While `throttling` is True it refuses each create (and each create of a ConfigMap so
labelled: `probe`) with `status.code` 429 and `details.retryAfterSeconds` (kube-apiserver answers the client with
that code and sets `Retry-After` from it: k8s.io/apiserver admission webhook `ToStatusErr`, responsewriters
`ErrorNegotiated`); else it allows. `refused` counts the refusals. Use as a context manager.
"""
from __future__ import annotations

from kubernetes import client
from kubernetes.client.rest import ApiException

from scheduling.constants import LABEL_JOB_UID

from .admission_webhook import AdmissionWebhook


class ThrottlingWebhook(AdmissionWebhook):
    """See the module docstring."""

    name_prefix = "throttle"

    def __init__(self, api, namespace: str, ref, job_uid: str, retry_after: int = 3):
        super().__init__(api, namespace, ref, job_uid)
        self.retry_after = retry_after
        self.throttling = True
        self.refused = 0

    def answer(self, request: dict) -> dict:
        """429 with `retryAfterSeconds` while `throttling`, else allowed."""
        if not self.throttling:
            return {"allowed": True}
        self.refused += 1
        return {"allowed": False, "status": {"code": 429, "reason": "TooManyRequests",
                                             "message": "throttled by the test's webhook",
                                             "details": {"retryAfterSeconds": self.retry_after}}}

    def probe(self) -> int:
        """The HTTP status of a dry-run create of a ConfigMap labelled like the job's objects: 429 once the API
        server calls this webhook (its configuration takes a moment to reach the admission chain)."""
        body = {"metadata": {"name": "throttle-probe", "labels": {LABEL_JOB_UID: self.job_uid}}}
        try:
            client.CoreV1Api(self.api).create_namespaced_config_map(self.namespace, body, dry_run="All")
        except ApiException as exc:
            return exc.status
        return 201
