"""Pagination of the API's lists.

- BoundedLimitOffsetPagination (every list but the jobs'): `limit` at most MAX_LIMIT, `offset` at most MAX_OFFSET.
  DRF's LimitOffsetPagination passes any integer to SQL, and a LIMIT or OFFSET beyond 64 bits is a database error
  (a 500 on SQLite; found by schema fuzzing).
- JobListPagination (GET /api/v1/jobs/): keyset pages (db/keyset.py) by default, so page 5,000 of a year of
  history costs what page 1 costs. The answer is ``{"count", "count_capped", "next", "previous", "last",
  "results"}``: `next` / `previous` / `last` are URLs carrying an opaque `cursor`; `count` is exact up to
  COUNT_CAP and `count_capped` says when more match (then `count` is COUNT_CAP). A request with `offset` gets the
  old limit/offset page with its exact count, so clients written for it keep working (each page then costs its
  offset).

Both check their query parameters with a serializer (PageQuerySerializer, JobPageQuerySerializer): `?limit=abc`,
`?limit=0`, `?offset=-1` or a `cursor` no list made is a 400 naming each bad parameter, never silently the default
page. `query_errors` gives those errors without raising, so the filter backend (api/filters.py) reports them with
the filters' own in one answer. An empty value (`?limit=`) counts as absent, as an empty filter does.
"""
from rest_framework import serializers
from rest_framework.exceptions import ValidationError
from rest_framework.pagination import LimitOffsetPagination
from rest_framework.response import Response
from rest_framework.utils.urls import remove_query_param, replace_query_param

from ..db import keyset

MAX_LIMIT = 5000  # the largest bulk submit, so a pipeline can read back what it submitted in one page
MAX_OFFSET = 10**12  # far past any table; a larger offset simply returns an empty page
COUNT_CAP = 10_000  # as the dashboard's job count (views/jobs.py)


def _cursor_shape(value: str) -> None:
    try:
        keyset.parse(value)
    except ValueError as exc:
        raise serializers.ValidationError(str(exc)) from exc


class PageQuerySerializer(serializers.Serializer):
    """The page parameters of a list: `limit` (rows, at least 1; more than MAX_LIMIT reads as MAX_LIMIT) and
    `offset` (rows skipped, at least 0; more than MAX_OFFSET reads as MAX_OFFSET)."""

    limit = serializers.IntegerField(min_value=1, required=False)
    offset = serializers.IntegerField(min_value=0, required=False)


class JobPageQuerySerializer(PageQuerySerializer):
    """PageQuerySerializer and `cursor`: opaque, from a `next`, `previous` or `last` link."""

    cursor = serializers.CharField(required=False, validators=[_cursor_shape])


class BoundedLimitOffsetPagination(LimitOffsetPagination):
    """LimitOffsetPagination with `limit` capped at MAX_LIMIT and `offset` at MAX_OFFSET, both validated
    (PageQuerySerializer): a bad one is a 400 naming it."""

    max_limit = MAX_LIMIT
    query_serializer = PageQuerySerializer

    def _query(self, request) -> serializers.Serializer:
        names = self.query_serializer().fields
        data = {k: v for k, v in request.query_params.items() if k in names and v != ""}
        query = self.query_serializer(data=data)
        query.is_valid()
        return query

    def query_errors(self, request) -> dict:
        """{parameter: [message]} for each bad page parameter of `request`; {} when all are good."""
        return dict(self._query(request).errors)

    def page_params(self, request) -> dict:
        """The validated page parameters present in `request`. Raises ValidationError (400) naming each bad one."""
        query = self._query(request)
        if query.errors:
            raise ValidationError(query.errors)
        return query.validated_data

    def get_limit(self, request):
        limit = self.page_params(request).get("limit")
        return self.default_limit if limit is None else min(limit, self.max_limit)

    def get_offset(self, request):
        return min(self.page_params(request).get("offset", 0), MAX_OFFSET)


class JobListPagination(BoundedLimitOffsetPagination):
    """Keyset pages with `cursor` and `limit`; limit/offset pages when `offset` is given (see the module)."""

    cursor_query_param = "cursor"
    query_serializer = JobPageQuerySerializer
    keyset_page = None

    def paginate_queryset(self, queryset, request, view=None):
        self.keyset_page = None
        if self.offset_query_param in request.query_params:
            return super().paginate_queryset(queryset, request, view)
        self.request = request
        self.limit = self.get_limit(request)
        try:
            self.keyset_page = keyset.page(queryset, self.limit, request.query_params.get(self.cursor_query_param))
        except ValueError as exc:
            raise ValidationError({self.cursor_query_param: [str(exc)]}) from exc
        self.count, self.count_capped = keyset.capped_count(queryset, COUNT_CAP)
        return self.keyset_page.rows

    def _link(self, cursor):
        if cursor is None:
            return None
        url = remove_query_param(self.request.build_absolute_uri(), self.offset_query_param)
        return replace_query_param(url, self.cursor_query_param, cursor)

    def get_paginated_response(self, data):
        if self.keyset_page is None:
            return super().get_paginated_response(data)
        page = self.keyset_page
        return Response({"count": self.count, "count_capped": self.count_capped, "next": self._link(page.next),
                         "previous": self._link(page.previous), "last": self._link(page.last), "results": data})

    def get_paginated_response_schema(self, schema):
        out = super().get_paginated_response_schema(schema)
        props = out["properties"]
        props["count_capped"] = {"type": "boolean", "description": f"more than {COUNT_CAP} match (keyset pages)"}
        props["last"] = {"type": "string", "nullable": True, "format": "uri"}
        return out

    def get_schema_operation_parameters(self, view):
        return [*super().get_schema_operation_parameters(view), {
            "name": self.cursor_query_param, "required": False, "in": "query",
            "description": "Opaque position from a `next`, `previous` or `last` link (keyset pages).",
            "schema": {"type": "string"}}]
