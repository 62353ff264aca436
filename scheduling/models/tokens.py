"""API tokens for pipelines: scoped to queues and actions, expiring, revocable, stored only as a hash."""
import hashlib

from django.conf import settings
from django.db import models
from django.utils import timezone

TOKEN_PREFIX = "gw_"


def hash_secret(secret: str) -> str:
    """SHA-256 hex of a token secret. The secret has 256 bits of entropy, so a fast hash is enough (no KDF)."""
    return hashlib.sha256(secret.encode()).hexdigest()


class ApiToken(models.Model):
    """A bearer token `gw_<lookup>_<secret>`, shown once at creation (see services/access/tokens.py).

    - `lookup` (public, unique) finds the row; `secret_hash` is SHA-256 of the whole token, compared in constant
      time.
    - `actions` is a list of TokenAction values; `queues` empty means every queue the owner may use.
    - The token never exceeds its owner: access.py intersects the owner's roles with the scopes, and tokens can
      never manage queues, templates, clusters or tokens.
    - `last_used_at` is updated at most once a minute (LAST_USED_RESOLUTION_SECONDS).
    """

    LAST_USED_RESOLUTION_SECONDS = 60

    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens")
    name = models.CharField(max_length=100)
    lookup = models.CharField(max_length=16, unique=True)
    secret_hash = models.CharField(max_length=64)
    actions = models.JSONField(default=list)
    queues = models.ManyToManyField("scheduling.QueuePolicy", blank=True, related_name="api_tokens")
    created_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)
    last_used_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self):
        return f"{self.name} ({TOKEN_PREFIX}{self.lookup}_…)"

    @property
    def is_active(self) -> bool:
        """Not revoked and not expired."""
        now = timezone.now()
        return self.revoked_at is None and (self.expires_at is None or self.expires_at > now)
