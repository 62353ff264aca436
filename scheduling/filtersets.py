"""One FilterSet per model, shared by the API viewsets and the dashboard lists."""
import datetime

import django_filters
from django import forms
from django.core.exceptions import ValidationError

from .choices import PENDING_CHOICE, PENDING_PHASES, PHASE_FILTER_CHOICES
from .models import AuditEvent, Cluster, GangJob, QueuePolicy, RuntimeTemplate
from .services.jobs.lists import GROUP_CHOICES


class UTCIsoDateTimeFilter(django_filters.IsoDateTimeFilter):
    """An ISO 8601 date-time, converted to UTC before it reaches the database: PostgreSQL refuses UTC offsets beyond
    +-15:59, which ISO 8601 allows (found by schema fuzzing)."""

    def filter(self, qs, value):
        if value is not None:
            try:
                value = value.astimezone(datetime.UTC)
            except OverflowError:
                raise ValidationError({self.field_name: "date-time out of range"}) from None
        return super().filter(qs, value)


class ChoiceMessages(django_filters.FilterSet):
    """A FilterSet whose bad choice names the valid values: `?phase=Bogus` is 400 {"phase": ["'Bogus' is not
    one of: Submitted, Dispatched, ..."]}, not Django's "Select a valid choice" alone. Fixed choices only (a
    model choice would read its table to list them)."""

    @property
    def form(self):
        if not hasattr(self, "_form"):
            form = super().form
            for field in form.fields.values():
                if isinstance(field, forms.ChoiceField) and not isinstance(field, forms.ModelChoiceField):
                    valid = ", ".join(str(value) for value, _ in field.choices if value != "")
                    field.error_messages["invalid_choice"] = f"'%(value)s' is not one of: {valid}"
        return self._form


class PhaseFilter(django_filters.MultipleChoiceFilter):
    """Phases, any of them; the choice `pending` stands for every waiting phase (choices.PENDING_PHASES:
    Submitted, Dispatched, Queued), so "everything waiting" is one choice whichever step a job waits at."""

    def filter(self, qs, value):
        expanded = []
        for v in value or []:
            expanded.extend(PENDING_PHASES if v == PENDING_CHOICE else [v])
        return super().filter(qs, list(dict.fromkeys(expanded)))


class GangJobFilterSet(ChoiceMessages):
    """Jobs by queue, phase, cluster, submitter, namespace, name search (`name` or `q`: the name contains it,
    case-insensitive) and created time (ISO 8601). `group` (queue, cluster or phase) filters nothing: it is
    validated here, with the filters, and the lists order by it (services/jobs/lists.py)."""

    queue = django_filters.CharFilter(field_name="queue__name")
    # distinct=False: a filter on the job's own column cannot repeat rows, and django-filter's default DISTINCT
    # (over every selected column, JSON included) made ?phase= lists sort the whole match (bench/: 100k jobs).
    phase = PhaseFilter(choices=PHASE_FILTER_CHOICES, distinct=False)
    cluster = django_filters.CharFilter(field_name="cluster__name")
    submitter = django_filters.CharFilter(field_name="submitted_by__username")
    namespace = django_filters.CharFilter()
    template = django_filters.CharFilter(field_name="template_version__template__name")
    name = django_filters.CharFilter(field_name="name", lookup_expr="icontains", label="Name contains")
    q = django_filters.CharFilter(field_name="name", lookup_expr="icontains", label="Name contains")
    group = django_filters.ChoiceFilter(choices=GROUP_CHOICES, method="by_group", label="Group by")
    created_after = UTCIsoDateTimeFilter(field_name="created_at", lookup_expr="gte")
    created_before = UTCIsoDateTimeFilter(field_name="created_at", lookup_expr="lt")

    class Meta:
        model = GangJob
        fields = ["queue", "phase", "cluster", "submitter", "namespace", "template", "name", "q", "group",
                  "created_after", "created_before"]

    def by_group(self, queryset, name, value):
        """No filter: the list views order by the group (services.jobs.lists.ordered) after their own sort."""
        return queryset


class QueuePolicyFilterSet(ChoiceMessages):
    """Queues by parent name, cluster and managed flag."""

    parent = django_filters.CharFilter(field_name="parent__name")
    cluster = django_filters.CharFilter(field_name="clusters__name")
    q = django_filters.CharFilter(field_name="name", lookup_expr="icontains")

    class Meta:
        model = QueuePolicy
        fields = ["parent", "cluster", "managed", "q"]


class RuntimeTemplateFilterSet(ChoiceMessages):
    """Templates by name search."""

    q = django_filters.CharFilter(field_name="name", lookup_expr="icontains")

    class Meta:
        model = RuntimeTemplate
        fields = ["q"]


class ClusterFilterSet(ChoiceMessages):
    """Clusters by health."""

    class Meta:
        model = Cluster
        fields = ["health"]


class AuditEventFilterSet(ChoiceMessages):
    """Audit events by action, object type and id, actor username and time (ISO 8601)."""

    actor = django_filters.CharFilter(field_name="actor_name")
    after = UTCIsoDateTimeFilter(field_name="at", lookup_expr="gte")
    before = UTCIsoDateTimeFilter(field_name="at", lookup_expr="lt")

    class Meta:
        model = AuditEvent
        fields = ["action", "object_type", "object_id", "actor", "after", "before"]
