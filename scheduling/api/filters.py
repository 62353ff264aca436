"""The API's filter backend: django-filter's, reporting every bad query parameter of a list in one 400.

django-filter's DjangoFilterBackend raises its FilterSet's form errors alone; the page parameters (`limit`,
`offset`, `cursor`: the paginator's serializer, api/pagination.py) are read later and DRF's OrderingFilter drops an
unknown `ordering` field silently. Here a list request is checked whole before anything is read:
``{"phase": ["Bogus is not one of: Submitted, ..."], "limit": ["A valid integer is required."],
"ordering": ["unknown field 'bogus'; one of: created_at, name"]}``.
"""
from django_filters import utils
from django_filters.rest_framework import DjangoFilterBackend
from rest_framework.exceptions import ValidationError
from rest_framework.filters import OrderingFilter


def ordering_errors(request, queryset, view) -> dict:
    """{"ordering": [message]} when `?ordering=` names a field the view does not sort by (DRF's OrderingFilter
    would ignore it); {} otherwise."""
    ordering = OrderingFilter()
    terms = [t.strip() for t in request.query_params.get(ordering.ordering_param, "").split(",") if t.strip()]
    if not terms:
        return {}
    valid = [name for name, _ in ordering.get_valid_fields(queryset, view, {"request": request})]
    unknown = [t for t in terms if t.lstrip("-") not in valid]
    if not unknown:
        return {}
    return {ordering.ordering_param: [f"unknown field {', '.join(repr(t) for t in unknown)}; one of: "
                                      f"{', '.join(valid)} (a leading '-' sorts descending)"]}


class ValidatingFilterBackend(DjangoFilterBackend):
    """DjangoFilterBackend whose 400 names every bad query parameter of a list: the FilterSet's (each with what
    is wrong; a choice lists the valid values, filtersets.ChoiceMessages), `ordering`, and the paginator's."""

    def filter_queryset(self, request, queryset, view):
        errors = {}
        is_list = getattr(view, "action", None) == "list" or not getattr(view, "kwargs", None)
        paginator = getattr(view, "paginator", None) if is_list else None
        if paginator is not None and hasattr(paginator, "query_errors"):
            errors.update(paginator.query_errors(request))
        if is_list and OrderingFilter in getattr(view, "filter_backends", ()):
            errors.update(ordering_errors(request, queryset, view))
        filterset = self.get_filterset(request, queryset, view)
        if filterset is not None and not filterset.is_valid():
            errors.update(utils.translate_validation(filterset.errors).detail)
        if errors:
            raise ValidationError(errors)
        return queryset if filterset is None else filterset.qs
