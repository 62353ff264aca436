"""Error classification (transient vs terminal), the per-cluster client factory and the task retry policy."""
import json

import pytest
import urllib3
import yaml
from kubernetes.client.rest import ApiException

from scheduling import tasks
from scheduling.kube import client as kube_client
from scheduling.kube import errors
from scheduling.models import Cluster


def api_error(status, message="boom"):
    """An ApiException with the Status body an API server sends (only a Status body's message is ever shown)."""
    exc = ApiException(status=status, reason="Reason")
    exc.body = json.dumps({"kind": "Status", "apiVersion": "v1", "status": "Failure", "message": message})
    return exc


@pytest.mark.parametrize("exc, kind, reason", [
    (urllib3.exceptions.MaxRetryError(None, "/", "refused"), errors.TransientKubeError, "ClusterUnreachable"),
    (ConnectionRefusedError(111, "refused"), errors.TransientKubeError, "ClusterUnreachable"),
    (api_error(429), errors.TransientKubeError, "Throttled"),
    (api_error(500), errors.TransientKubeError, "ServerError"),
    (api_error(503), errors.TransientKubeError, "ServerError"),
    (api_error(403), errors.TransientKubeError, "Forbidden"),
    # RBAC refuses gangweb's identity: an admin grants the role and the retry goes through.
    (api_error(403, 'jobs.batch is forbidden: User "system:serviceaccount:gw:gangweb" cannot create resource "jobs" '
                    'in API group "batch" in the namespace "ml"'), errors.TransientKubeError, "Forbidden"),
    # Admission refuses the object itself: the same object gets the same answer.
    (api_error(403, 'jobs.batch "train-0" is forbidden: exceeded quota: no-jobs, requested: count/jobs.batch=1, '
                    "used: count/jobs.batch=0, limited: count/jobs.batch=0"), errors.TerminalKubeError, "Forbidden"),
    (api_error(403, 'jobs.batch "train-0" is forbidden: exceeded quota: pods, requested: count/jobs.batch=1,'
                    'requests.cpu=2, used: count/jobs.batch=0,requests.cpu=0, limited: count/jobs.batch=5,'
                    'requests.cpu=1'), errors.TerminalKubeError, "Forbidden"),
    # A quota full of other objects for now: the object fits by itself, so it waits for them to go (retried).
    (api_error(403, 'jobs.batch "train-0" is forbidden: exceeded quota: few-jobs, requested: count/jobs.batch=1, '
                    "used: count/jobs.batch=4, limited: count/jobs.batch=4"), errors.TransientKubeError,
     "QuotaExceeded"),
    (api_error(403, 'services "s" is forbidden: exceeded quota: q, requested: count/services=1,requests.cpu=500m, '
                    "used: count/services=0,requests.cpu=1800m, limited: count/services=3,requests.cpu=2"),
     errors.TransientKubeError, "QuotaExceeded"),
    (api_error(403, 'admission webhook "policy.example.com" denied the request: no GPUs in ml'),
     errors.TerminalKubeError, "Forbidden"),
    (api_error(403, "podgroups.scheduling.k8s.io \"g\" is forbidden: ValidatingAdmissionPolicy 'p' with binding 'b' "
                    "denied request: minCount too large"), errors.TerminalKubeError, "Forbidden"),
    (api_error(401), errors.TransientKubeError, "Unauthorized"),
    (api_error(422, "spec.minMember: Invalid value"), errors.TerminalKubeError, "Invalid"),
    (api_error(400), errors.TerminalKubeError, "Invalid"),
    (api_error(405), errors.TerminalKubeError, "Rejected"),
])
def test_failures_are_classified(exc, kind, reason):
    classified = errors.classify(exc)
    assert type(classified) is kind and classified.reason == reason
    assert errors.classify(ValueError("not an API failure")) is None


@pytest.mark.parametrize("status, terminal_for_good", [(400, True), (422, True), (403, True), (409, False),
                                                       (405, False)])
def test_a_create_is_refused_for_good_only_by_400_422_and_admission_403(status, terminal_for_good):
    message = "exceeded quota: q" if status == 403 else "nope"
    classified = errors.classify(api_error(status, message))
    assert errors.refuses_for_good(classified) is terminal_for_good
    for transient in (api_error(429), api_error(500), api_error(403, 'User "u" cannot create resource "jobs"')):
        assert not errors.refuses_for_good(errors.classify(transient))


def test_call_passes_404_and_409_through_as_answers():
    def raise_(exc):
        raise exc

    for status in (404, 409):
        with pytest.raises(ApiException):
            errors.call(raise_, api_error(status))
    with pytest.raises(errors.TerminalKubeError, match="spec.minMember"):
        errors.call(raise_, api_error(422, "spec.minMember: Invalid value"))



def status_404(kind, name):
    """A 404 with the Status body the API server sends (as answered by Kubernetes 1.36 to a create)."""
    exc = ApiException(status=404, reason="Not Found")
    exc.body = json.dumps({"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "NotFound",
                           "message": f'{kind} "{name}" not found', "details": {"name": name, "kind": kind},
                           "code": 404})
    return exc


def test_a_404_for_a_missing_namespace_is_a_transient_namespace_not_found():
    def raise_(exc):
        raise exc

    missing = status_404("namespaces", "doesnotexist")
    assert errors.missing_namespace(missing) == "doesnotexist"
    classified = errors.classify(missing)
    assert type(classified) is errors.TransientKubeError
    assert (classified.reason, classified.status) == ("NamespaceNotFound", 404)
    assert classified.message == 'namespace "doesnotexist" does not exist'
    with pytest.raises(errors.TransientKubeError, match="NamespaceNotFound"):
        errors.call(raise_, missing)
    # A 404 for the object itself stays an answer for the caller.
    gone = status_404("jobs.batch", "j-1")
    assert errors.missing_namespace(gone) is None
    with pytest.raises(ApiException):
        errors.call(raise_, gone)
    assert errors.missing_namespace(api_error(404)) is None


KUBECONFIG = {
    "apiVersion": "v1", "kind": "Config", "current-context": "a",
    "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:1"}},
                 {"name": "d", "cluster": {"server": "https://127.0.0.2:2"}}],
    "users": [{"name": "u", "user": {"token": "t"}}],
    "contexts": [{"name": "a", "context": {"cluster": "c", "user": "u"}},
                 {"name": "b", "context": {"cluster": "d", "user": "u"}}],
}


@pytest.mark.django_db
def test_clients_are_cached_per_cluster_and_rebuilt_when_the_kubeconfig_changes():
    cluster = Cluster.objects.create(name="x", kubeconfig=yaml.safe_dump(KUBECONFIG))
    first = kube_client.api_client(cluster)
    assert first.configuration.host == "https://127.0.0.1:1" and first.configuration.retries == 1
    assert kube_client.api_client(cluster) is first
    cluster.context = "b"
    second = kube_client.api_client(cluster)
    assert second is not first and second.configuration.host == "https://127.0.0.2:2"
    cluster.kubeconfig = "not: [a, kubeconfig"
    with pytest.raises(errors.TerminalKubeError, match="InvalidKubeconfig"):
        kube_client.api_client(cluster)
    kube_client.forget(cluster.pk)


def test_reconcile_task_retries_only_transient_errors_with_backoff_and_a_cap():
    task = tasks.reconcile_job
    assert task.name == "scheduling.reconcile_job"
    assert tuple(task.autoretry_for) == (errors.TransientKubeError,)
    assert task.retry_backoff and task.retry_jitter and task.max_retries == 8 and task.retry_backoff_max == 300
    assert task.time_limit and task.soft_time_limit


def test_what_viewers_read_of_a_failure_holds_no_server_body_token_or_file():
    not_status = ApiException(status=500, reason="Internal: root:x:0:0")
    not_status.body = "root:x:0:0:root:/root:/bin/bash"
    assert errors.describe(not_status) == "ServerError: HTTP 500 Internal Server Error"
    status = api_error(403, 'pods is forbidden: User "gangweb" cannot list resource "pods"')
    assert errors.describe(status) == 'Forbidden: pods is forbidden: User "gangweb" cannot list resource "pods"'
    header = ValueError("Invalid header value b'Bearer tok-secret\\n'")
    assert errors.describe(header) == "ValueError (unexpected; details are in the server log)"
    assert errors.redact(str(header)) == "Invalid header value b'Bearer [redacted]'"
    assert errors.redact("authorization: basic dXNlcjpwdw==") == "authorization: basic [redacted]"


def test_log_lines_carry_no_server_body_or_token(caplog):
    import logging

    log = logging.getLogger("scheduling.test")
    body = ApiException(status=500, reason="Internal")
    body.body = "INTERNAL-BODY root:x:0:0"
    for exc in (body, ValueError("Invalid header value b'Bearer tok-secret\\n'")):
        try:
            try:
                raise exc
            except Exception as inner:
                raise RuntimeError("pass failed") from inner
        except RuntimeError:
            log.exception("reconcile failed")
    assert "INTERNAL-BODY" not in caplog.text and "tok-secret" not in caplog.text
    assert "ServerError: HTTP 500 Internal Server Error" in caplog.text and "Bearer [redacted]" in caplog.text


# kube-apiserver 1.37.2's answers over v1alpha2 Workloads/PodGroups left in etcd (tests/cluster/test_upgrade.py).
UNDECODABLE_LIST = ('storage is (re)initializing: failed to list <unspecified>: failed to read one or more '
                    'podgroups.scheduling.k8s.io from the storage: StorageError: corrupt object, Code: 7, Key: '
                    '/registry/podgroups/team-b/secret-project, ResourceVersion: 0, AdditionalErrorMsg: object not '
                    'decodable revision=229: no kind "PodGroup" is registered for version "scheduling.k8s.io/v1alpha2"'
                    ' in scheme "pkg/runtime/scheme.go:111"')
UNDECODABLE_GET = ('Internal error occurred: StorageError: corrupt object, Code: 7, Key: /workloads/default/w, '
                   'ResourceVersion: 0, AdditionalErrorMsg: object not decodable revision=228: no kind "Workload" is '
                   'registered for version "scheduling.k8s.io/v1alpha2" in scheme "pkg/runtime/scheme.go:111"')


@pytest.mark.parametrize("status, message, kind, resource", [
    (429, UNDECODABLE_LIST, "PodGroup", "podgroups.scheduling.k8s.io"),
    (500, UNDECODABLE_GET, "Workload", "workloads.scheduling.k8s.io"),
])
def test_objects_of_a_removed_api_version_are_a_transient_error_saying_what_an_admin_must_do(status, message, kind,
                                                                                             resource):
    exc = ApiException(status=status)
    exc.body = json.dumps({"kind": "Status", "apiVersion": "v1", "status": "Failure", "message": message,
                           "code": status})

    err = errors.classify(exc)

    assert isinstance(err, errors.TransientKubeError) and err.reason == "StoredVersionUnreadable"
    assert f"cannot read {kind} objects stored as scheduling.k8s.io/v1alpha2" in err.message
    assert (f"kubectl delete {resource} NAME -n NAMESPACE "
            "--ignore-store-read-error-with-cluster-breaking-potential=true") in err.message
    assert "team-b" not in err.message and "secret-project" not in err.message  # another team's object: not named


def test_a_plain_429_is_still_throttled():
    exc = ApiException(status=429)
    exc.body = json.dumps({"kind": "Status", "message": "storage is (re)initializing", "code": 429})
    assert errors.classify(exc).reason == "Throttled"


def test_row1_a_pool_manager_the_library_built_is_rebuilt_never_to_follow_redirects():
    import urllib3

    from scheduling.security import outbound

    built = urllib3.PoolManager(num_pools=3, maxsize=7, cert_reqs="CERT_REQUIRED")
    rebuilt = outbound.without_redirects(built)
    assert isinstance(rebuilt, outbound.NoRedirectPoolManager)
    assert rebuilt.connection_pool_kw == built.connection_pool_kw
    proxied = outbound.without_redirects(urllib3.ProxyManager("http://127.0.0.1:3128", maxsize=2))
    assert isinstance(proxied, outbound.NoRedirectProxyManager) and str(proxied.proxy) == "http://127.0.0.1:3128"
