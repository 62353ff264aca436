"""HTTP to the gangweb API: one requests Session per retry policy, retries and backoff by urllib3's Retry.

- Safe to repeat (GET, and the submits, which always carry an Idempotency-Key): connection errors, read errors
  (the connection dropped after the request was sent) and 429/502/503/504 are retried with exponential backoff
  and jitter, honouring `Retry-After`.
- Not safe to repeat (resubmit, cancel, token creation): only errors before the request was sent are retried, so
  a request the server may have acted on is never sent twice.
"""
from __future__ import annotations

import requests
from requests.adapters import HTTPAdapter
from urllib3.util.retry import Retry

from .errors import TransportError, from_response
from .version import __version__

RETRY_STATUSES = (429, 502, 503, 504)


def _retry(retries: int, backoff: float, repeatable: bool) -> Retry:
    return Retry(total=retries, connect=retries, read=retries if repeatable else 0,
                 status=retries if repeatable else 0, other=0, redirect=0,
                 allowed_methods=None if repeatable else frozenset({"GET", "HEAD"}), status_forcelist=RETRY_STATUSES,
                 backoff_factor=backoff, backoff_max=30, backoff_jitter=backoff / 2,
                 respect_retry_after_header=True, raise_on_status=False, raise_on_redirect=False)


class Transport:
    """Sends requests to `base_url` + `/api/v1` + path and returns decoded JSON, raising the SDK's errors.

    `retries`: attempts after the first for each retryable failure (default 5: about 15 s of backoff with
    `backoff` 0.5 s, doubling); `timeout`: seconds to connect and to wait for an answer (long-polls add theirs).
    Authentication: a bearer `token`, or `basic=(username, password)` (only `gangweb login` uses it).
    """

    def __init__(self, base_url: str, token: str | None = None, *, basic: tuple[str, str] | None = None,
                 retries: int = 5, backoff: float = 0.5, timeout: float = 30.0, verify: bool | str = True):
        self.base_url = base_url.rstrip("/")
        self.timeout = timeout
        self._sessions = {}
        for repeatable in (True, False):
            session = requests.Session()
            adapter = HTTPAdapter(max_retries=_retry(retries, backoff, repeatable))
            session.mount("http://", adapter)
            session.mount("https://", adapter)
            session.headers["User-Agent"] = f"gangweb-client/{__version__}"
            session.headers["Accept"] = "application/json"
            if token:
                session.headers["Authorization"] = f"Bearer {token}"
            if basic:
                session.auth = basic
            session.verify = verify
            self._sessions[repeatable] = session

    def request(self, method: str, path: str, *, params=None, json=None, headers=None, repeatable: bool | None = None,
                read_timeout: float | None = None):
        """The decoded JSON body (None for an empty one). `repeatable` defaults to True for GET only.
        Raises ApiError (NotFound, Unauthorized) for error statuses and TransportError when the server cannot be
        reached after the retries."""
        if repeatable is None:
            repeatable = method == "GET"
        url = f"{self.base_url}/api/v1/{path.lstrip('/')}"
        try:
            response = self._sessions[repeatable].request(
                method, url, params=params, json=json, headers=headers,
                timeout=(self.timeout, read_timeout or self.timeout))
        except requests.exceptions.RequestException as exc:
            raise TransportError(f"{method} {url}: {_reason(exc)}") from exc
        if response.status_code >= 400:
            raise from_response(response.status_code, _error_body(response), method, path)
        if not response.content:
            return None
        try:
            return response.json()
        except ValueError as exc:
            raise TransportError(f"{method} {url}: the answer is not JSON (is {self.base_url} a gangweb server?)") \
                from exc

    def stream(self, path: str, *, params=None, read_timeout: float | None = None):
        """A GET whose answer is text, not JSON (a log): the open `requests.Response` (read it with
        `iter_content`; close it when done). Retried as any GET until an answer starts; a stream cut later is not
        resumed. Raises ApiError for error statuses and TransportError when the server cannot be reached."""
        url = f"{self.base_url}/api/v1/{path.lstrip('/')}"
        try:
            response = self._sessions[True].get(url, params=params, stream=True,
                                                timeout=(self.timeout, read_timeout or self.timeout))
        except requests.exceptions.RequestException as exc:
            raise TransportError(f"GET {url}: {_reason(exc)}") from exc
        if response.status_code >= 400:
            try:
                body = _error_body(response)
            finally:
                response.close()
            raise from_response(response.status_code, body, "GET", path)
        return response

    def close(self) -> None:
        """Close the connection pools."""
        for session in self._sessions.values():
            session.close()


def _error_body(response) -> dict:
    """An error answer's JSON body, or {"detail": [its text (first 500 characters) or reason]} when it is not JSON."""
    try:
        return response.json()
    except ValueError:
        return {"detail": [response.text.strip()[:500] or response.reason or "error"]}


def _reason(exc: Exception) -> str:
    """The innermost cause of a requests error in a few words (urllib3 wraps it in MaxRetryError)."""
    inner = exc.args[0] if exc.args else exc
    reason = getattr(inner, "reason", None)
    text = str(reason or inner)
    if "Max retries exceeded" in str(inner):
        text = f"gave up after retries: {reason or inner}"
    return text[:300]
