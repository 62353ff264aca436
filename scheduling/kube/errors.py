"""Kubernetes API failures sorted into transient (retry with backoff) and terminal (record, do not retry).

- Transient: the cluster cannot be reached (connection refused/reset, TLS or DNS failure, timeout), 429 Too
  Many Requests, 5xx, 401, and a 403 that refuses gangweb's identity (RBAC: `User "..." cannot create resource
  ...`) or cannot be told apart from one. Credentials and RBAC are gangweb's own, fixed by an admin without
  touching the job, and a missing role refuses every job of the cluster alike: recorded on the job and retried
  with backoff rather than failing them all for good.
- NamespaceNotFound (transient, for the same reason): a create answered 404 whose Status names the namespace
  itself (`details.kind == "namespaces"`, message `namespaces "x" not found`). The job's namespace is missing
  in its cluster; a user creates it and the next retry or resync proceeds (level-triggered).
- QuotaExceeded (transient): a 403 "exceeded quota" where the object fits the quota's limit by itself and is
  refused only because of the objects the namespace holds now (`quota_frees_up`): they go, so the job waits.
- Terminal: 400 Bad Request and 422 Invalid (the object itself is wrong; retrying cannot help), a 403 by which
  admission refuses the object itself (`admission_refusal`: a ResourceQuota "exceeded quota" the object alone
  exceeds, a webhook or ValidatingAdmissionPolicy that "denied the request"; the same object gets the same
  answer), and other 4xx not handled by the caller.
- Where others stand: Armada's executor fails a job whose pod create is answered Invalid or Forbidden (any
  403, RBAC included; `isRecoverable`, internal/executor/job/submit.go); Kueue and other controller-runtime
  controllers requeue every failed create with backoff. gangweb splits 403 by who is refused: the object
  (admission, terminal, as Armada) or gangweb (authorization, retried, as Kueue).
- Other 404s and 409 are answers the reconciler handles itself (`ApiException.status`).
"""
from __future__ import annotations

import json
import logging
import re
import socket
import ssl
import traceback
from http import HTTPStatus

import urllib3
from kubernetes.client.rest import ApiException

from ..security import outbound

log = logging.getLogger(__name__)

CLUSTER_UNREACHABLE = "ClusterUnreachable"
FORBIDDEN = "Forbidden"
UNAUTHORIZED = "Unauthorized"
THROTTLED = "Throttled"
SERVER_ERROR = "ServerError"
INVALID = "Invalid"
REJECTED = "Rejected"
NAMESPACE_NOT_FOUND = "NamespaceNotFound"
# An object under a name gangweb must use exists and is not gangweb's (reconcile/jobs/writes.py): not an error of
# reaching the cluster, and its message names the object, its UID and the way out.
NAME_CONFLICT = "NameConflict"
CREATE_REFUSED = "CreateRefused"
QUOTA_EXCEEDED = "QuotaExceeded"
# The server answered 3xx: gangweb never follows a redirect (scheduling/security/outbound.py, issue 32 row 1);
# transient, as a misconfigured server is an admin's to fix and the same request may then succeed.
REDIRECTED = "Redirected"
# The API server holds objects of a kind it cannot decode: written in an API version its release no longer has
# (Kubernetes 1.37 removed scheduling.k8s.io/v1alpha2; a cluster upgraded with v1alpha2 Workloads/PodGroups left in
# etcd). Every LIST of that resource fails, in every namespace (429 "storage is (re)initializing ... corrupt
# object", kube-apiserver's watch cache cannot start), a GET of such an object 500, a create over its name 409. Only
# a cluster admin can clear it: transient, retried, and the message says what to run.
STORED_VERSION_UNREADABLE = "StoredVersionUnreadable"
# A paginated LIST whose continue token kept expiring (410 Gone) before its last page (kube/objects.py list_pages):
# the API server's snapshot was compacted away between pages, again and again; transient, the next pass lists again.
LIST_EXPIRED = "ListExpired"

# Words of the admission plugins that refuse an object with 403 Forbidden (kube-apiserver): ResourceQuota
# ("exceeded quota: q, requested: count/jobs.batch=1, used: ..., limited: ..."), admission webhooks
# ('admission webhook "x" denied the request: ...'), ValidatingAdmissionPolicy ("... denied request: ..."),
# PodSecurity ("violates PodSecurity"). An RBAC denial ('User "u" cannot create resource "jobs" ...') has none.
ADMISSION_REFUSAL = re.compile(r"exceeded quota|admission webhook|denied (the )?request|ValidatingAdmissionPolicy|"
                               r"violates PodSecurity")


class KubeError(Exception):
    """A classified API failure: `reason` (CamelCase, shown on the job), `status` (HTTP code or None)."""

    def __init__(self, reason: str, message: str, status: int | None = None, api_reason: str = ""):
        super().__init__(f"{reason}: {message}")
        self.reason = reason
        self.message = message
        self.status = status
        self.api_reason = api_reason  # the API server's Status `reason` ("Invalid", "Forbidden", ...), if any
        self.retry_after: float | None = None  # seconds the server asked to wait (`Retry-After`), if it said so


class TransientKubeError(KubeError):
    """Retry later with backoff: the cluster is down, overloaded, or refuses our credentials for now."""


class TerminalKubeError(KubeError):
    """Do not retry: the request itself is wrong (400/422) or the object cannot be ours (name conflict)."""


class CreateRefused(TerminalKubeError):
    """The API server refused for good to create one of a job's objects (400, 422, or a 403 from admission).

    `kind`, `name` (namespace/name) say which; `reason` is CREATE_REFUSED, `api_reason` the server's own
    ("Invalid", "BadRequest", "Forbidden"), `message` names the object, the status and the server's words.
    """

    def __init__(self, kind: str, name: str, refused: KubeError):
        said = f"HTTP {refused.status} {refused.api_reason or refused.reason}"
        super().__init__(CREATE_REFUSED, f"the API server refused to create {kind} {name} ({said}): "
                                         f"{refused.message}", refused.status, refused.api_reason or refused.reason)
        self.kind, self.name = kind, name


def refuses_for_good(err: KubeError) -> bool:
    """True when a create answered `err` can never succeed as it is: a terminal 400, 422 or 403 (admission)."""
    return isinstance(err, TerminalKubeError) and err.status in (400, 403, 422)


CONNECTION_ERRORS = (urllib3.exceptions.HTTPError, ConnectionError, socket.timeout, TimeoutError, ssl.SSLError,
                     OSError)


def _status_body(exc: ApiException) -> dict:
    """The Kubernetes Status object of an ApiException's body, or {} when the body is not one."""
    try:
        body = json.loads(exc.body)
    except (TypeError, ValueError):
        return {}
    return body if isinstance(body, dict) else {}


UNREACHABLE_MESSAGE = ("the API server is unreachable (no connection or no answer in time; details are in the server "
                       "log)")
MAX_SERVER_MESSAGE = 500  # characters of a Status message kept


def _api_message(exc: ApiException) -> str:
    """What the server said, for people: the `message` of a Kubernetes Status body (kind "Status", capped at
    MAX_SERVER_MESSAGE), else only the standard phrase of the HTTP status ("HTTP 404 Not Found"). Never the raw
    body or the server's own reason phrase: a server that is not an API server (an internal service a kubeconfig
    points at) must not get its answer shown to viewers (issue 15, M1)."""
    body = _status_body(exc)
    message = body.get("message") if body.get("kind") == "Status" else None
    if isinstance(message, str) and message:
        return redact(message[:MAX_SERVER_MESSAGE])
    try:
        phrase = HTTPStatus(exc.status or 0).phrase
    except ValueError:
        phrase = "unknown status"
    return f"HTTP {exc.status or 0} {phrase}" if exc.status else "no HTTP answer"


# An Authorization header value that an error message might quote (http.client's "Invalid header value"): the
# credential must never reach a page, an API answer or a log line (issue 15, M2).
BEARER = re.compile(r"(?i)(bearer|basic)(\s|%20|\\[nrt])+[^\s'\"]+")


def redact(text: str) -> str:
    """`text` with any "Bearer <token>" / "Basic <credentials>" replaced by "Bearer [redacted]"."""
    return BEARER.sub(lambda m: f"{m.group(1)} [redacted]", text or "")


def describe(exc: BaseException, limit: int = 1000) -> str:
    """A one-line account of `exc` safe to show any viewer (a job's events error, a cluster's health, an attempt
    row, a log line): a KubeError's reason and message (server words only from a Status body), a classified API
    or connection failure likewise, anything else by its type only (its text may quote credentials or a file:
    it stays in the server log's traceback). Credentials are redacted and the text capped at `limit`."""
    classified = classify(exc)
    if classified is not None:
        text = f"{classified.reason}: {classified.message}"
    else:
        text = f"{type(exc).__name__} (unexpected; details are in the server log)"
    return redact(text)[:limit]


def admission_refusal(message: str) -> bool:
    """True when a 403's message shows an admission plugin refusing the object (ADMISSION_REFUSAL), not RBAC
    refusing gangweb; an unknown 403 is taken as RBAC (retried: failing a job needlessly is the worse mistake)."""
    return bool(ADMISSION_REFUSAL.search(message or ""))


# kube-apiserver's words for such an object (k8s.io/apiserver storage errors; observed on 1.37.2 over v1alpha2 data):
# "StorageError: corrupt object, Code: 7, Key: /registry/podgroups/ns/name, ... object not decodable ...: no kind
# \"PodGroup\" is registered for version \"scheduling.k8s.io/v1alpha2\" in scheme ...".
UNDECODABLE = re.compile(r'corrupt object.*?no kind "(?P<kind>[A-Za-z0-9]+)" is registered for version '
                         r'"(?P<version>[a-z0-9.-]+/v[0-9a-z]+)"', re.S)
UNDECODABLE_RESOURCE = re.compile(r"read one or more (?P<resource>[a-z0-9.-]+) from the storage|Key: /(?:registry/)?"
                                  r"(?P<plural>[a-z0-9]+)/")


def stored_version_unreadable(message: str) -> TransientKubeError | None:
    """The StoredVersionUnreadable error when a Status `message` says the API server cannot decode a stored object
    of a removed API version (UNDECODABLE), else None. The message names the kind and the stored version and how an
    admin clears it; never the object's namespace or name, which may be another team's (the LIST is cluster-wide).
    Source: kube-apiserver 1.37.2 answering LIST/GET of workloads and podgroups over v1alpha2 data (docs/backends.md).
    """
    found = UNDECODABLE.search(message or "")
    if found is None:
        return None
    kind, version = found["kind"], found["version"]
    group = version.rsplit("/", 1)[0]
    named = UNDECODABLE_RESOURCE.search(message)
    resource = (named["resource"] or f"{named['plural']}.{group}") if named else f"{kind.lower()}s.{group}"
    return TransientKubeError(
        STORED_VERSION_UNREADABLE,
        f"the API server cannot read {kind} objects stored as {version}, an API version this Kubernetes release no "
        f"longer serves, so no {resource} can be listed in any namespace. A cluster admin must delete them, as the "
        f"release notes ask before upgrading (the answer to kubectl get {resource} -A quotes their keys; kubectl "
        f"delete {resource} NAME -n NAMESPACE --ignore-store-read-error-with-cluster-breaking-potential=true); "
        "gangweb retries until then",
        429)


# The ResourceQuota admission plugin's words (kube-apiserver plugin/pkg/admission/resourcequota/controller.go):
# "exceeded quota: <name>, requested: <r>=<q>[,...], used: <r>=<q>[,...], limited: <r>=<q>[,...]".
QUOTA_WORDS = re.compile(r"exceeded quota: [^,]+, requested: (?P<requested>\S*), used: (?P<used>\S*), "
                         r"limited: (?P<limited>\S*)")


def _quantities(listed: str) -> dict[str, object]:
    from kubernetes.utils import parse_quantity

    out = {}
    for item in filter(None, listed.split(",")):
        resource, _, value = item.partition("=")
        out[resource] = parse_quantity(value)
    return out


def quota_frees_up(message: str) -> bool:
    """True when a 403 "exceeded quota" refuses an object only because of what the namespace holds now: every
    resource it requests fits the quota's limit by itself (requested <= limited), so it fits once other objects
    are gone. False when one request alone exceeds its limit (a quota of 0 jobs: the same object is always
    refused), or the words do not parse (then the refusal is taken as it says: for good)."""
    found = QUOTA_WORDS.search(message or "")
    if found is None:
        return False
    try:
        requested, limited = _quantities(found["requested"]), _quantities(found["limited"])
    except (ValueError, ArithmeticError):
        return False
    return bool(requested) and all(r in limited and q <= limited[r] for r, q in requested.items())


def missing_namespace(exc: BaseException) -> str | None:
    """The namespace name when `exc` is a 404 saying the namespace itself does not exist (Status
    `{"reason": "NotFound", "details": {"kind": "namespaces", "name": <ns>}}`, as the API server answers a
    create in a missing namespace), else None. A 404 for the object itself names its own kind instead."""
    if not isinstance(exc, ApiException) or exc.status != 404:
        return None
    details = _status_body(exc).get("details") or {}
    if details.get("kind") == "namespaces" and details.get("name"):
        return str(details["name"])
    return None


MAX_RETRY_AFTER = 300.0  # seconds: a longer (or hostile) Retry-After is capped; the resync covers anything longer


def retry_after(exc: ApiException) -> float | None:
    """Seconds an answer asks the client to wait before trying again: its `Retry-After` header (delay-seconds; an
    HTTP date is not used by kube-apiserver, which writes `Status.details.retryAfterSeconds` there:
    k8s.io/apiserver pkg/endpoints/handlers/responsewriters `ErrorNegotiated`), else the Status body's
    `details.retryAfterSeconds`. None when neither says a number; at most MAX_RETRY_AFTER, at least 0."""
    headers = getattr(exc, "headers", None) or {}
    value = None
    try:
        value = headers.get("Retry-After") if hasattr(headers, "get") else None
    except Exception:  # noqa: BLE001 - a header mapping of an odd type: as if absent
        value = None
    if value is None:
        value = (_status_body(exc).get("details") or {}).get("retryAfterSeconds") \
            if isinstance(_status_body(exc).get("details"), dict) else None
    try:
        seconds = float(value)
    except (TypeError, ValueError):
        return None
    if seconds != seconds:  # NaN
        return None
    return min(max(seconds, 0.0), MAX_RETRY_AFTER)


def _with_status(status: int, message: str) -> str:
    return message if message.startswith("HTTP ") else f"{status} {message}"


def classify(exc: BaseException) -> KubeError | None:
    """The KubeError for an exception from the kubernetes client, or None when it is not an API failure."""
    if isinstance(exc, KubeError):
        return exc
    if isinstance(exc, ApiException):
        status = exc.status or 0
        message = _api_message(exc)
        api_reason = str(_status_body(exc).get("reason") or "")
        if status == 0:
            return TransientKubeError(CLUSTER_UNREACHABLE, message)
        if outbound.is_redirect(status):
            return TransientKubeError(REDIRECTED, outbound.redirect_message(status), status)
        namespace = missing_namespace(exc)
        if namespace:
            return TransientKubeError(NAMESPACE_NOT_FOUND, f'namespace "{namespace}" does not exist', status)
        unreadable = stored_version_unreadable(str(_status_body(exc).get("message") or ""))
        if unreadable is not None and status in (429, 500):
            return unreadable
        if status == 429:
            throttled = TransientKubeError(THROTTLED, message, status)
            throttled.retry_after = retry_after(exc)
            return throttled
        if status >= 500:
            return TransientKubeError(SERVER_ERROR, _with_status(status, message), status)
        if status == 403:
            if quota_frees_up(message):  # full of other objects for now: wait (retried) rather than fail
                return TransientKubeError(QUOTA_EXCEEDED, message, status, api_reason or FORBIDDEN)
            if admission_refusal(message):
                return TerminalKubeError(FORBIDDEN, message, status, api_reason or FORBIDDEN)
            return TransientKubeError(FORBIDDEN, message, status, api_reason)
        if status == 401:
            return TransientKubeError(UNAUTHORIZED, message, status)
        if status in (400, 422):
            return TerminalKubeError(INVALID, message, status, api_reason)
        return TerminalKubeError(REJECTED, _with_status(status, message), status, api_reason)
    if isinstance(exc, CONNECTION_ERRORS):
        # Which address was tried and whether its port refused, reset or stayed silent is a map of the network
        # around gangweb (issue 32 row 7): users read only that the server is unreachable; the server log keeps
        # the full text.
        log.info("cluster connection failed: %s", redact(f"{type(exc).__name__}: {exc}")[:1000])
        return TransientKubeError(CLUSTER_UNREACHABLE, UNREACHABLE_MESSAGE)
    return None


def call(fn, *args, **kwargs):
    """Call a kubernetes client function; raise its failure as a KubeError (404/409 stay ApiException, because
    callers handle them as answers, except a 404 for a missing namespace: NamespaceNotFound)."""
    try:
        return fn(*args, **kwargs)
    except ApiException as exc:
        if exc.status in (404, 409) and not missing_namespace(exc):
            raise
        raise classify(exc) from exc
    except CONNECTION_ERRORS as exc:
        raise classify(exc) from exc


def _redacted_traceback(exc_info) -> str:
    """The traceback text of `exc_info` with each ApiException's text (status, headers, raw body) replaced by its
    `describe` account, and credentials redacted."""
    text = "".join(traceback.format_exception(*exc_info)).rstrip("\n")
    seen, current = set(), exc_info[1]
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, ApiException):
            raw = str(current)
            if raw:
                text = text.replace(raw, describe(current))
        current = current.__cause__ or current.__context__
    return redact(text)


def install_log_redaction() -> None:
    """Make every log record of this process carry a redacted traceback (`record.exc_text`, which
    `logging.Formatter` prints instead of formatting the exception itself): an ApiException's str() holds the
    server's raw response body and headers, and a failed header its credential (issue 15, M1/M2). A record
    factory, not a handler filter, so it holds in Celery workers too (they replace the root handlers). Idempotent.
    """
    factory = logging.getLogRecordFactory()
    if getattr(factory, "gangweb_redacting", False):
        return

    def make_record(*args, **kwargs):
        record = factory(*args, **kwargs)
        if record.exc_info and record.exc_info[1] is not None and not record.exc_text:
            try:
                record.exc_text = _redacted_traceback(record.exc_info)
            except Exception:  # noqa: BLE001 - never lose the log line over its traceback
                record.exc_text = f"{type(record.exc_info[1]).__name__} (traceback could not be redacted)"
        return record

    make_record.gangweb_redacting = True
    logging.setLogRecordFactory(make_record)
