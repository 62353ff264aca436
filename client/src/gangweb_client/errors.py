"""Errors the SDK raises. Each carries the CLI exit code it maps to (see `exitcodes`)."""
from __future__ import annotations

from . import exitcodes


class GangwebError(Exception):
    """Base class. `exit_code` is what the `gangweb` command exits with when this error ends it."""

    exit_code = exitcodes.SERVER_ERROR


class InputError(GangwebError):
    """Input the client refuses before sending anything: an unreadable or malformed job file, a bad flag value,
    no server URL configured. Exit code 4."""

    exit_code = exitcodes.USAGE


class TransportError(GangwebError):
    """The server could not be reached, or kept answering 429/502/503/504, after every retry. Exit code 5."""

    exit_code = exitcodes.SERVER_ERROR


class ApiError(GangwebError):
    """The API answered with an error status.

    `status` is the HTTP status; `errors` is the API's body in DRF's shape, `{field: [message, ...]}` (`detail`
    for errors about no field in particular; a bulk submit names items as `jobs[3].queue`). `field` and `message`
    are the first of them, what a script most often wants. 4xx exit with code 4, 5xx with 5.
    """

    def __init__(self, status: int, errors: dict | list | str | None, method: str = "", path: str = ""):
        self.status, self.method, self.path = status, method, path
        self.errors = _normalise(errors)
        self.field, messages = next(iter(self.errors.items())) if self.errors else ("detail", [f"HTTP {status}"])
        self.message = "; ".join(messages)
        self.exit_code = exitcodes.USAGE if 400 <= status < 500 else exitcodes.SERVER_ERROR
        super().__init__(f"HTTP {status}: {self.field}: {self.message}")

    def lines(self) -> list[str]:
        """One line per field: `field: message; message`."""
        return [f"{field}: {'; '.join(messages)}" for field, messages in self.errors.items()]


class NotFound(ApiError):
    """404: no such object, or one the caller may not see (the API answers both alike)."""


class Unauthorized(ApiError):
    """401 (no, a wrong, expired or revoked token) or 403 (not allowed)."""


def _normalise(errors) -> dict[str, list[str]]:
    """DRF error bodies come as {field: [msg]}, {field: msg}, {"detail": msg}, [msg] or nested dicts."""
    if errors is None:
        return {}
    if isinstance(errors, str):
        return {"detail": [errors]}
    if isinstance(errors, list):
        return {"detail": [str(e) for e in errors]}
    out: dict[str, list[str]] = {}
    for field, value in errors.items():
        if isinstance(value, list):
            out[str(field)] = [v if isinstance(v, str) else str(v) for v in value]
        elif isinstance(value, dict):
            for sub, messages in _normalise(value).items():
                out[f"{field}.{sub}"] = messages
        else:
            out[str(field)] = [str(value)]
    return out


def from_response(status: int, body, method: str, path: str) -> ApiError:
    """The ApiError subclass for an error response."""
    cls = NotFound if status == 404 else Unauthorized if status in (401, 403) else ApiError
    return cls(status, body, method, path)
