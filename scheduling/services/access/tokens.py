"""Create, authenticate and revoke API tokens (models.ApiToken).

Create body::

    {"name": "ci-pipeline", "actions": ["read", "submit"], "queues": ["team-a"] (optional: all of yours),
     "expires_at": "2027-01-01T00:00:00Z" (optional: GANGWEB_TOKEN_DEFAULT_DAYS from now)}

The plaintext token `gw_<lookup>_<secret>` is returned once by `create`, and only its SHA-256 is kept.
"""
from __future__ import annotations

import hmac
import secrets
from datetime import timedelta

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from ...choices import TokenAction
from ...models import ApiToken, QueuePolicy
from ...models.tokens import TOKEN_PREFIX, hash_secret
from .. import validation as v
from ..errors import Conflict, PermissionDenied
from . import audit
from . import roles as access

CREATE_FIELDS = ("name", "actions", "queues", "expires_at")


def _default_days() -> int:
    return int(getattr(settings, "GANGWEB_TOKEN_DEFAULT_DAYS", 90))


def _max_days() -> int:
    return int(getattr(settings, "GANGWEB_TOKEN_MAX_DAYS", 366))


def create(user, data) -> tuple[ApiToken, str]:
    """Create a token for `user`. Returns (token, plaintext); the plaintext is never available again.

    Raises ValidationError naming the field (unknown action, queue you have no role on, expiry in the past or
    beyond GANGWEB_TOKEN_MAX_DAYS) and PermissionDenied when called with a token.
    """
    access.check_manage_tokens(user)
    v.mapping(data, "body")
    unknown = sorted(set(data) - set(CREATE_FIELDS))
    if unknown:
        raise ValidationError({unknown[0]: f"unknown field; allowed fields are {', '.join(CREATE_FIELDS)}"})
    name = v.string(data.get("name"), "name", max_length=100)
    actions = data.get("actions", [TokenAction.READ.value])
    v.string_list(actions, "actions")
    if not actions:
        raise ValidationError({"actions": "name at least one of " + ", ".join(TokenAction.values)})
    for i, action in enumerate(actions):
        if action not in TokenAction.values:
            raise ValidationError({f"actions[{i}]": f"'{str(action)[:40]}' is not one of "
                                                    + ", ".join(TokenAction.values)})
    queue_names = data.get("queues", [])
    v.string_list(queue_names, "queues")
    queues = {q.name: q for q in QueuePolicy.objects.filter(name__in=queue_names)}
    roles = access.queue_roles(user) if queue_names else {}
    for i, qname in enumerate(queue_names):
        if qname not in queues or queues[qname].pk not in roles:
            raise ValidationError({f"queues[{i}]": f"no queue named '{qname[:80]}' that you have a role on"})
    now = timezone.now()
    expires_at = data.get("expires_at")
    if expires_at is None:
        expires_at = now + timedelta(days=_default_days())
    else:
        try:
            parsed = v.date_time(expires_at, "expires_at", require_zone=True)
        except ValidationError:
            raise ValidationError({"expires_at": "must be an ISO 8601 date-time with a time zone"}) from None
        if parsed <= now:
            raise ValidationError({"expires_at": "must be in the future"})
        if parsed > now + timedelta(days=_max_days()):
            raise ValidationError({"expires_at": f"must be at most {_max_days()} days from now"})
        expires_at = parsed
    lookup = secrets.token_hex(6)
    plaintext = f"{TOKEN_PREFIX}{lookup}_{secrets.token_urlsafe(32)}"
    with transaction.atomic():
        check_token_cap(user, now)
        token = ApiToken.objects.create(owner=user, name=name, lookup=lookup, secret_hash=hash_secret(plaintext),
                                        actions=sorted(set(actions)), expires_at=expires_at)
        token.queues.set(queues.values())
        audit.record(user, "token.create", token, {"actions": token.actions, "queues": sorted(queues),
                                                   "expires_at": expires_at.isoformat()})
    return token, plaintext


def tokens_per_user() -> int:
    """settings.GANGWEB_TOKENS_PER_USER (20): active tokens one user may hold."""
    return int(getattr(settings, "GANGWEB_TOKENS_PER_USER", 20))


def check_token_cap(user, now) -> None:
    """Raise Conflict (409) naming the cap when `user` already holds GANGWEB_TOKENS_PER_USER active (unrevoked,
    unexpired) tokens. Each token is a caller identity, so an unbounded number multiplied every per-token limit
    (issue 32 row 3). The user's row is locked first, so two concurrent creates cannot both pass. Call inside a
    transaction."""
    from django.contrib.auth import get_user_model
    from django.db.models import Q

    get_user_model().objects.select_for_update().filter(pk=user.pk).first()
    cap = tokens_per_user()
    active = ApiToken.objects.filter(owner=user, revoked_at__isnull=True).filter(
        Q(expires_at__isnull=True) | Q(expires_at__gt=now)).count()
    if active >= cap:
        raise Conflict({"tokens": f"at most {cap} active tokens per user (GANGWEB_TOKENS_PER_USER); you have "
                                  f"{active}: revoke one first"})


def authenticate(raw: str) -> ApiToken | None:
    """The active token whose plaintext is `raw`, with its owner loaded; None when unknown, revoked or expired.

    Records `last_used_at` at most once per ApiToken.LAST_USED_RESOLUTION_SECONDS (one UPDATE, no read-modify-write).
    """
    if not isinstance(raw, str) or not raw.startswith(TOKEN_PREFIX) or len(raw) > 200:
        return None
    parts = raw.split("_", 2)
    if len(parts) != 3:
        return None
    token = ApiToken.objects.select_related("owner").filter(lookup=parts[1]).first()
    if token is None or not hmac.compare_digest(token.secret_hash, hash_secret(raw)):
        return None
    if not token.is_active or not token.owner.is_active:
        return None
    now = timezone.now()
    stale = now - timedelta(seconds=ApiToken.LAST_USED_RESOLUTION_SECONDS)
    if token.last_used_at is None or token.last_used_at < stale:
        ApiToken.objects.filter(pk=token.pk).update(last_used_at=now)
        token.last_used_at = now
    return token


def visible(user, queryset):
    """The tokens `user` may list: their own; every token for platform admins."""
    if access.is_platform_admin(user):
        return queryset
    if user is None or not user.is_authenticated or access.token_of(user) is not None:
        return queryset.none()
    return queryset.filter(owner=user)


def revoke(user, token: ApiToken) -> ApiToken:
    """Revoke `token` now (its owner or a platform admin). Revoking twice is a no-op. Raises PermissionDenied."""
    access.check_manage_tokens(user)
    if token.owner_id != user.pk and not access.is_platform_admin(user):
        raise PermissionDenied({"token": "not allowed to revoke this token"})
    if token.revoked_at is None:
        with transaction.atomic():
            token.revoked_at = timezone.now()
            token.save(update_fields=["revoked_at"])
            audit.record(user, "token.revoke", token)
    return token


def revoke_scoped_only_to(*policies: QueuePolicy) -> None:
    """Revoke the live API tokens whose whole queue scope is among `policies` (queues about to be deleted, in the
    caller's transaction): deleting them would empty the tokens' scope, and an empty scope means every queue of their
    owner (models.tokens.ApiToken.queues), a widening nobody asked for. Tokens scoped to other queues too just lose
    these.

    The candidate tokens are locked (SELECT ... FOR UPDATE, PostgreSQL; SQLite runs one writer at a time) before
    their scopes are read, so two deletes at once of a token's last two queues run one after the other and the
    second sees the first's: without the lock each saw the other queue still in the scope, revoked nothing, and the
    token was left with an empty scope. Raises the database's errors."""
    ids = {p.pk for p in policies}
    if not ids:
        return
    candidates = set(ApiToken.objects.filter(queues__in=ids, revoked_at__isnull=True).values_list("pk", flat=True))
    if not candidates:
        return
    locked = list(ApiToken.objects.select_for_update().filter(pk__in=candidates, revoked_at__isnull=True)
                  .order_by("pk").values_list("pk", flat=True))
    scopes: dict[int, set] = {}
    for token_id, queue_id in ApiToken.objects.filter(pk__in=locked).values_list("pk", "queues"):
        scopes.setdefault(token_id, set()).add(queue_id)
    only = [token_id for token_id, scope in scopes.items() if scope and scope <= ids]
    if only:
        ApiToken.objects.filter(pk__in=only).update(revoked_at=timezone.now())
