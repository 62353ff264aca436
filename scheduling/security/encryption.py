"""Encryption of credentials at rest (kubeconfigs, cluster tokens) with `cryptography`'s Fernet.

Keys come from the environment variable GANGWEB_ENCRYPTION_KEYS: comma-separated Fernet keys (32 url-safe
base64-encoded bytes each, e.g. from `python -c "from cryptography.fernet import Fernet;
print(Fernet.generate_key().decode())"`). The first key encrypts; every key decrypts, so a new key is put first,
`manage.py rotate_encryption_key` re-encrypts every row, and the old key can then be removed.
Only when DEBUG or GANGWEB_TESTING is on and no keys are set is a key derived from SECRET_KEY.
"""
from __future__ import annotations

import base64
import hashlib
import threading
import time
from functools import lru_cache

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

# Every ciphertext starts with this marker, so a plaintext row (e.g. written before encryption) is recognisable.
PREFIX = "fernet:"
# `decrypt_cached`: how many stored values are remembered, and for how long (seconds) each stays.
DECRYPTED_KEPT = 64
DECRYPTED_SECONDS = 300.0
_decrypted: dict[tuple, tuple[str, float]] = {}
_decrypted_lock = threading.Lock()


class DecryptionError(Exception):
    """A stored value cannot be decrypted with any configured key (a key was removed too early)."""


def derived_dev_key(secret_key: str) -> bytes:
    """The development key: SHA-256 of SECRET_KEY, url-safe base64 (a valid Fernet key). Never used in production."""
    return base64.urlsafe_b64encode(hashlib.sha256(f"gangweb-encryption:{secret_key}".encode()).digest())


def configured_keys() -> list[bytes]:
    """The Fernet keys in force, current first. Raises ImproperlyConfigured when none are set outside dev/test."""
    raw = [k.strip() for k in (getattr(settings, "GANGWEB_ENCRYPTION_KEYS", None) or []) if k.strip()]
    if raw:
        return [k.encode() for k in raw]
    if settings.DEBUG or getattr(settings, "TESTING", False):
        return [derived_dev_key(settings.SECRET_KEY)]
    raise ImproperlyConfigured("GANGWEB_ENCRYPTION_KEYS must be set when DEBUG is off")


@lru_cache(maxsize=8)
def _fernet(keys: tuple[bytes, ...]) -> MultiFernet:
    try:
        return MultiFernet([Fernet(k) for k in keys])
    except ValueError as exc:
        raise ImproperlyConfigured(f"GANGWEB_ENCRYPTION_KEYS holds an invalid Fernet key: {exc}") from None


def fernet() -> MultiFernet:
    """The MultiFernet for the configured keys (cached per key list, so settings overrides in tests apply)."""
    return _fernet(tuple(configured_keys()))


def encrypt(plaintext: str) -> str:
    """Encrypt text with the current key: returns "fernet:<token>"; the empty string stays empty."""
    if not plaintext:
        return ""
    return PREFIX + fernet().encrypt(plaintext.encode()).decode()


def decrypt(stored: str) -> str:
    """Decrypt a value written by `encrypt`. Raises DecryptionError when no configured key opens it.

    A value without the marker is returned as is: it was stored before encryption existed and is encrypted on
    the next save or by `rotate_encryption_key`.
    """
    if not stored or not stored.startswith(PREFIX):
        return stored or ""
    try:
        return fernet().decrypt(stored[len(PREFIX):].encode()).decode()
    except InvalidToken:
        raise DecryptionError("stored credential cannot be decrypted with any key in GANGWEB_ENCRYPTION_KEYS") from None


def decrypt_cached(stored: str) -> str:
    """`decrypt`, remembered for DECRYPTED_SECONDS per stored value and key list (at most DECRYPTED_KEPT values).

    Why: every read of a row with an encrypted column decrypts it (`models.fields.EncryptedTextField`), and a job's
    row is read joined with its cluster by each watch observation and each reconcile pass: decrypting the cluster's
    kubeconfig was 8 % of the watcher's CPU (bench/README). A stored value is its credential's version: Fernet
    ciphertext is randomised, so every save of a credential stores a new value, and the old one is never looked up
    again. With the key list in the cache key, a key taken out of GANGWEB_ENCRYPTION_KEYS stops opening anything
    at once; the plaintext stays in memory for at most DECRYPTED_SECONDS (as it does in the cached API client).
    Raises DecryptionError as `decrypt` does (never remembered)."""
    if not stored or not stored.startswith(PREFIX):
        return stored or ""
    key = (tuple(configured_keys()), stored)
    now = time.monotonic()
    hit = _decrypted.get(key)
    if hit is not None and now - hit[1] <= DECRYPTED_SECONDS:
        return hit[0]
    plaintext = decrypt(stored)
    with _decrypted_lock:
        if len(_decrypted) >= DECRYPTED_KEPT:
            for old in [k for k, (_, at) in _decrypted.items() if now - at > DECRYPTED_SECONDS] or list(_decrypted):
                del _decrypted[old]
        _decrypted[key] = (plaintext, now)
    return plaintext


def forget_decrypted() -> None:
    """Drop every remembered plaintext (`decrypt_cached`): tests, and a key rotation's command."""
    with _decrypted_lock:
        _decrypted.clear()
