"""Webhook delivery, the worker's side of notifications: the outbox scan that turns recent timeline entries into
deliveries, and the signed POST of each (Standard Webhooks), pinned to the checked address, with retries on the
task (scheduling.deliver_webhook). The subscriptions themselves: services/webhooks/subscriptions.py.
"""
from __future__ import annotations

import json
import logging
import ssl
from datetime import timedelta
from urllib.parse import urlsplit

import urllib3
from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import Exists, OuterRef, Q
from django.utils import timezone
from standardwebhooks.webhooks import Webhook
from urllib3.exceptions import LocationParseError
from urllib3.util import parse_url

from ...choices import GangPhase
from ...models import DeliveryStatus, GangJob, PhaseTransition, WebhookDelivery, WebhookSubscription
from ...security import addresses, outbound
from ..access import roles as access

log = logging.getLogger(__name__)


class DeliveryRetry(Exception):
    """A webhook delivery attempt failed in a way worth retrying (connection error, timeout, 408/429/5xx): the
    Celery task `scheduling.deliver_webhook` retries it with exponential backoff (services/webhooks/delivery.py)."""

ERROR_BODY_BYTES = 200  # of a receiver's non-2xx answer, kept in the delivery log

SCAN_WINDOW = timedelta(minutes=10)

REENQUEUE_AFTER = timedelta(minutes=30)  # a Pending delivery's task longer ago than this was lost: send again

def timeouts() -> tuple[float, float]:
    """(connect, read) seconds of one delivery's POST: settings.GANGWEB_WEBHOOK_CONNECT_TIMEOUT_SECONDS (3) and
    GANGWEB_WEBHOOK_TIMEOUT_SECONDS (5). A receiver slower than that is a failed attempt, retried with backoff; it
    costs a slot of the webhook worker (its own Celery queue, never the reconcile worker's) that long at most."""
    return (float(getattr(settings, "GANGWEB_WEBHOOK_CONNECT_TIMEOUT_SECONDS", 3.0)),
            float(getattr(settings, "GANGWEB_WEBHOOK_TIMEOUT_SECONDS", 5.0)))

WEBHOOK_SETTING = "GANGWEB_ALLOW_PRIVATE_WEBHOOK_ADDRESSES"

def webhook_policy() -> addresses.AddressPolicy:
    """The install's outbound address policy for webhook receivers: settings.GANGWEB_ALLOW_PRIVATE_WEBHOOK_ADDRESSES
    read as `addresses.AddressPolicy.parse` reads it (off, on, or a comma-separated CIDR list)."""
    return addresses.AddressPolicy.parse(str(getattr(settings, "GANGWEB_ALLOW_PRIVATE_WEBHOOK_ADDRESSES", "") or ""))

def check_target_url(url: str, field: str = "url") -> tuple[str, int, str, str]:
    """Raise ValidationError({field: reason}) unless `url` is an http(s) URL whose host resolves only to
    addresses webhooks may reach under the install's outbound address rules (`scheduling/security/addresses.py`, shared
    with cluster API servers): public addresses, plus the non-public ranges
    settings.GANGWEB_ALLOW_PRIVATE_WEBHOOK_ADDRESSES allows. Cloud metadata, unspecified, multicast and reserved
    addresses are refused always.

    Returns (host, port, scheme, address): the checked address a delivery connects to (pinned, issue 32 row 2).
    The reason names no address a name resolves to (row 7); the full text goes to the server log."""
    host, port, scheme = _target(url, field)
    try:
        checked = addresses.resolve(host, port, webhook_policy())
    except addresses.AddressRefused as exc:
        # Name the setting: an admin who means a receiver on loopback or the private network knows what to set.
        raise ValidationError({field: f"{exc}; receivers on loopback, private or link-local addresses are allowed "
                                      f"by the setting {WEBHOOK_SETTING}"}) from None
    except (OSError, UnicodeError) as exc:
        log.info("webhook target %s does not resolve: %s", host[:100], exc)
        raise ValidationError({field: f"host '{host[:100]}' is unreachable: its name does not resolve"}) from None
    return host, port, scheme, checked[0]

def post(url: str, body: bytes, headers: dict) -> urllib3.BaseHTTPResponse:
    """POST `body` to `url` at the address its check returned (pinned: the URL holds the IP, `Host` and TLS SNI and
    certificate verification keep the name; `scheduling.security.outbound`), never following a redirect, with
    `timeouts()`. The answer is not read (`preload_content=False`, no decompression): the caller reads at most what it
    needs and releases it. Raises ValidationError (refused or unresolvable target) or urllib3's HTTPError."""
    host, port, scheme, address = check_target_url(url)
    pool = outbound.pool_manager(
        server_name=outbound.server_name_for(host) if scheme == "https" else None,
        ssl_context=ssl.create_default_context() if scheme == "https" else None, retries=0, maxsize=1,
        proxy=outbound.environment_proxy(url))
    connect, read = timeouts()
    try:
        return pool.request("POST", outbound.pinned_url(scheme, address, port, parse_url(url).request_uri),
                            body=body, headers={**headers, "Host": outbound.host_header(host, port, scheme)},
                            timeout=urllib3.Timeout(connect=connect, read=read), preload_content=False,
                            decode_content=False)
    finally:
        pool.clear()  # the answer's connection is released to no pool: it closes when the caller releases it

def _target(url, field: str) -> tuple[str, int, str]:
    """(host, port, scheme) that the HTTP client will connect to for `url`, or ValidationError({field: ...}).

    The host is read the way the client reads it (urllib3's `parse_url`, used by requests) and must agree with
    the standard library's reading: a URL the two parsers read differently (`http://127.0.0.1\\@1.1.1.1/`, where
    one sees 1.1.1.1 and the other connects to 127.0.0.1) is refused, and so are credentials, backslashes,
    whitespace and control characters anywhere in it."""
    message = "must be an http:// or https:// URL with a host (no credentials, backslashes or spaces)"
    if not isinstance(url, str) or not url or any(c in url for c in "\\@") or any(
            c.isspace() or ord(c) < 32 or ord(c) == 127 for c in url):
        raise ValidationError({field: message})
    try:
        std = urlsplit(url)
        std_host, std_port = std.hostname, std.port
        client = parse_url(url)
    except (ValueError, LocationParseError):
        raise ValidationError({field: message}) from None
    scheme = (client.scheme or "").lower()
    host = (client.host or "").strip("[]").lower()
    if scheme not in ("http", "https") or not host or std.scheme.lower() != scheme or (std_host or "") != host:
        raise ValidationError({field: message})
    port = client.port or (443 if scheme == "https" else 80)
    if (std_port or (443 if scheme == "https" else 80)) != port or not 0 < port < 65536:
        raise ValidationError({field: message})
    return host, port, scheme

def job_url(job_id: int) -> str:
    """The job's dashboard page (settings.GANGWEB_PUBLIC_URL + /jobs/<id>/)."""
    return f"{getattr(settings, 'GANGWEB_PUBLIC_URL', '').rstrip('/')}/jobs/{job_id}/"

def payload_for(entry: PhaseTransition, job: GangJob) -> dict:
    """The event body: Standard Webhooks' {type, timestamp, data} plus a Slack-compatible `text`. A Failed entry
    carries the job's first failure (`data.failure`, the API's `failure` object: observe/failure.py; null when
    the cluster said nothing more) and its one line in `text`."""
    reason = f" ({entry.reason})" if entry.reason else ""
    attempt = f", attempt {entry.attempt}" if entry.attempt else ""
    failure = None
    if entry.phase == GangPhase.FAILED and isinstance(job.observed, dict) and isinstance(
            job.observed.get("failure"), dict):
        failure = job.observed["failure"]
    said = f": {failure.get('summary')}" if failure and failure.get("summary") else ""
    return {
        "type": "job.phase_changed",
        "timestamp": entry.recorded_at.isoformat(),
        "text": f"gangweb: job {job.pk} {job.name} (queue {job.queue.name}, cluster {job.cluster.name}) is "
                f"{entry.phase}{reason}{attempt}{said} {job_url(job.pk)}",
        "data": {"job": {"id": job.pk, "uid": str(job.uid), "name": job.name, "namespace": job.namespace,
                         "url": job_url(job.pk)},
                 "queue": job.queue.name, "cluster": job.cluster.name, "phase": entry.phase,
                 "attempt": entry.attempt, "reason": entry.reason, "message": entry.message,
                 "at": entry.at.isoformat(), "recorded_at": entry.recorded_at.isoformat(),
                 "submitted_by": job.submitted_by.username if job.submitted_by_id else None,
                 **({"failure": failure} if entry.phase == GangPhase.FAILED else {})},
    }

def candidates(entries):
    """The active subscriptions that may match any of `entries` (a PhaseTransition queryset), chosen in SQL by
    the entries' jobs, queues, submitters and phases: a subscription whose job, queue or owner has no new entry,
    or whose phases exclude every new entry's phase, is never loaded (issue 32 row 4: 8,000 subscriptions that
    matched nothing made every scan time out). Each subscription's own query then checks the rest."""
    entries = entries.order_by()
    phases = set(entries.values_list("phase", flat=True).distinct())  # a handful: GangPhase values
    if not phases:
        return WebhookSubscription.objects.none()
    scope = (Q(job_id__in=entries.values("job_id"))
             | Q(job__isnull=True, queue_id__in=entries.values("job__queue_id"))
             | Q(job__isnull=True, queue__isnull=True, owner_id__in=entries.values("job__submitted_by_id")))
    # `phases` is a JSON list of phase names (GangPhase values: whole words), empty for all; matched as the quoted
    # name in its JSON text so SQLite and PostgreSQL agree (jsonb containment is PostgreSQL-only).
    by_phase = Q(phases=[])
    for phase in sorted(phases):
        by_phase |= Q(phases__icontains=f'"{phase}"')
    return WebhookSubscription.objects.filter(active=True).filter(scope).filter(by_phase)

def scan(now=None) -> list[int]:
    """Create the deliveries of every timeline entry recorded in the last SCAN_WINDOW for every active
    subscription it matches (scope, phases, the owner can see the job, recorded after the subscription) and that
    has no delivery for it yet, and return the ids of deliveries to send now (new ones, and lost ones). Idempotent:
    the unique (subscription, event id) also stops a row that a concurrent scan just made. Its cost follows the
    window's entries and the subscriptions they match (`candidates`), not the number of subscriptions."""
    now = now or timezone.now()
    since = now - SCAN_WINDOW
    rows: list[WebhookDelivery] = []
    window = PhaseTransition.objects.filter(recorded_at__gte=since)
    for sub in candidates(window).select_related("owner"):
        entries = window.filter(recorded_at__gte=max(since, sub.created_at))
        if sub.phases:
            entries = entries.filter(phase__in=sub.phases)
        jobs = GangJob.objects.all()
        if sub.job_id:
            jobs = jobs.filter(pk=sub.job_id)
        elif sub.queue_id:
            jobs = jobs.filter(queue_id=sub.queue_id)
        else:
            jobs = jobs.filter(submitted_by_id=sub.owner_id)
        jobs = access.visible_jobs(sub.owner, jobs)
        # Only entries without a delivery for this subscription yet: a scan's cost follows the new entries, not
        # the whole window (it rebuilt and re-inserted every payload of the last 10 minutes on each tick).
        entries = entries.filter(job__in=jobs.values("pk")).exclude(
            Exists(WebhookDelivery.objects.filter(subscription=sub, transition=OuterRef("pk")))).select_related(
            "job__queue", "job__cluster", "job__submitted_by")
        rows += [WebhookDelivery(subscription=sub, event_id=f"msg_{e.pk}", transition=e,
                                 payload=payload_for(e, e.job)) for e in entries]
    if rows:
        WebhookDelivery.objects.bulk_create(rows, ignore_conflicts=True, batch_size=500)
    with transaction.atomic():
        due = list(WebhookDelivery.objects.select_for_update(skip_locked=True).filter(
            status=DeliveryStatus.PENDING).filter(
            Q(enqueued_at__isnull=True) | Q(enqueued_at__lt=now - REENQUEUE_AFTER)).values_list("pk", flat=True)[:1000])
        WebhookDelivery.objects.filter(pk__in=due).update(enqueued_at=now)
    return due

def deliver(delivery_id: int, final: bool = False) -> str:
    """One signed POST of a delivery; records the attempt on its row and returns the status.

    Raises DeliveryRetry for a retryable failure unless `final` (the last retry: the row becomes Failed). A row
    already Delivered or Failed, or gone, is left alone (a duplicate task)."""
    delivery = WebhookDelivery.objects.select_related("subscription").filter(pk=delivery_id).first()
    if delivery is None or delivery.status != DeliveryStatus.PENDING:
        return delivery.status if delivery else "missing"
    sub = delivery.subscription
    now = timezone.now()
    delivery.attempts += 1
    delivery.last_attempt_at = now
    body = json.dumps(delivery.payload, separators=(",", ":"))
    retry = False
    try:
        signature = Webhook(sub.secret).sign(delivery.event_id, now, body)
        # The receiver's answer is never read beyond ERROR_BODY_BYTES (a huge or compressed body cannot fill the
        # worker's memory); identity encoding: no decompression at all.
        response = post(sub.url, body.encode(), {"Content-Type": "application/json",
                                                 "User-Agent": "gangweb-webhooks/1", "Accept-Encoding": "identity",
                                                 "webhook-id": delivery.event_id,
                                                 "webhook-timestamp": str(int(now.timestamp())),
                                                 "webhook-signature": signature})
        delivery.last_status_code = response.status
        try:
            ok = 200 <= response.status < 300
            head = b"" if ok or outbound.is_redirect(response.status) else (
                response.read(ERROR_BODY_BYTES, decode_content=False) or b"")
        finally:
            response.release_conn()
            response.close()
        if ok:
            delivery.status, delivery.delivered_at, delivery.last_error = DeliveryStatus.DELIVERED, now, ""
        elif outbound.is_redirect(response.status):  # row 1: never followed, and a wrong URL is not retried
            delivery.status, delivery.last_error = DeliveryStatus.FAILED, outbound.redirect_message(response.status)
        else:
            delivery.last_error = f"HTTP {response.status}: {head.decode('utf-8', 'replace')}"
            retry = response.status in (408, 429) or response.status >= 500
            if not retry:
                delivery.status = DeliveryStatus.FAILED
    except ValidationError as exc:
        delivery.status, delivery.last_error = DeliveryStatus.FAILED, "; ".join(
            m for ms in exc.message_dict.values() for m in ms)[:1000]
    except (urllib3.exceptions.HTTPError, OSError) as exc:
        # Row 7: which ports answer and what a name resolves to stay in the server log, not the delivery log.
        log.info("webhook delivery %s to subscription %s failed: %s: %s", delivery.pk, sub.pk, type(exc).__name__,
                 exc)
        cause = exc.reason if isinstance(exc, urllib3.exceptions.MaxRetryError) else exc
        timed_out = isinstance(cause, (urllib3.exceptions.TimeoutError, TimeoutError))
        delivery.last_error = ("unreachable: the receiver did not answer within the timeout" if timed_out else
                               "unreachable: no connection to the receiver (details are in the server log)")
        retry = True
    if retry and final:
        delivery.status = DeliveryStatus.FAILED
    delivery.save(update_fields=["attempts", "last_attempt_at", "last_status_code", "status", "delivered_at",
                                 "last_error"])
    if retry and not final:
        raise DeliveryRetry(delivery.last_error)
    return delivery.status
