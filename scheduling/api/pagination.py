"""Pagination with bounds: `limit` at most MAX_LIMIT, `offset` at most MAX_OFFSET.

DRF's LimitOffsetPagination passes any integer to SQL, and a LIMIT or OFFSET beyond 64 bits is a database error
(a 500 on SQLite; found by schema fuzzing).
"""
from rest_framework.pagination import LimitOffsetPagination

MAX_LIMIT = 5000  # the largest bulk submit, so a pipeline can read back what it submitted in one page
MAX_OFFSET = 10**12  # far past any table; a larger offset simply returns an empty page


class BoundedLimitOffsetPagination(LimitOffsetPagination):
    """LimitOffsetPagination with `limit` capped at MAX_LIMIT and `offset` at MAX_OFFSET."""

    max_limit = MAX_LIMIT

    def get_offset(self, request):
        return min(super().get_offset(request), MAX_OFFSET)
