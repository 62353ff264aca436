"""Service-level errors that both the API (as HTTP statuses) and the dashboard (as messages) understand.

Validation problems are Django's `ValidationError` with a dict {field: message} (400). The classes below
carry the same dict shape for the other 4xx answers, except `NotFound`, which is Django's Http404.
"""
from django.http import Http404


class ServiceError(Exception):
    """Base: `errors` is {field: message}; `status` is the HTTP status the API answers with."""

    status = 400

    def __init__(self, errors: dict[str, str] | str):
        self.errors = errors if isinstance(errors, dict) else {"detail": errors}
        super().__init__("; ".join(f"{k}: {v}" for k, v in self.errors.items()))


class Conflict(ServiceError):
    """The request conflicts with the current state (a name in use, a job already finished): 409."""

    status = 409


class IdempotencyMismatch(ServiceError):
    """An Idempotency-Key was reused with a different request body: 422."""

    status = 422


class NotKnownNow(ServiceError):
    """What the request needs to know is not known now and will be (a job with no cluster named while no candidate
    cluster's numbers are fresh): 503 with Retry-After `retry_after` seconds; nothing was changed."""

    status = 503
    retry_after = 30


class PermissionDenied(ServiceError):
    """The user or token may not do this to this queue or cluster: 403."""

    status = 403


class NotFound(Http404):
    """An object the user may not see: answered exactly as one that does not exist (404, Django's Http404 with
    `get_object_or_404`'s message), so its existence is not disclosed (as GitHub answers for a private repository).
    The API (DRF turns Http404 into {"detail": message}) and the pages (Django's 404) need no handling of their
    own."""

    def __init__(self, obj):
        super().__init__(f"No {type(obj)._meta.object_name} matches the given query.")
