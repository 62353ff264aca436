"""/api/v1/templates/: runtime templates, their versions, pod-security level and exceptions.
"""
from django.db.models import Prefetch
from drf_spectacular.utils import extend_schema
from rest_framework import status, viewsets
from rest_framework.decorators import action
from rest_framework.response import Response

from ...db import related
from ...filtersets import RuntimeTemplateFilterSet
from ...models import RuntimeTemplate, RuntimeTemplateVersion
from ...services.access import templates as template_access
from ...services.templates import policy
from ...services.templates import specs as template_service
from ...services.templates import versions as template_versions
from .. import serializers as s
from .common import VisibleObjectMixin


class RuntimeTemplateViewSet(VisibleObjectMixin, viewsets.ModelViewSet):
    """Runtime templates. Writing a spec stores a new version. Shared templates (no queue) are managed by platform
    admins, team templates by admins of their queue."""

    # Specs come through templates.loadable_spec: one stored before the size limit stays in the database.
    queryset = RuntimeTemplate.objects.select_related("queue").prefetch_related(Prefetch(
        "versions", queryset=RuntimeTemplateVersion.objects.defer("spec").annotate(
            shown_spec=template_service.loadable_spec())))
    serializer_class = s.RuntimeTemplateSerializer
    filterset_class = RuntimeTemplateFilterSet
    lookup_field = "name"
    visible = template_access.visible_templates
    check_read = template_access.check_read_template
    # The list: the owning queue's name by a lookup per template, the versions without the model's ordering by
    # template name (a join): joins planned from stale statistics scanned whole tables per row (issue 14).
    LIST_RELATED = {"queue": ["name"]}

    def base_queryset(self):
        if self.action != "list":
            return super().base_queryset()
        return related.annotate(RuntimeTemplate.objects.prefetch_related(
            Prefetch("versions", queryset=RuntimeTemplateVersion.objects.order_by())), self.LIST_RELATED)

    def paginate_queryset(self, queryset):
        page = super().paginate_queryset(queryset)
        if page is not None and self.action == "list":
            page = related.attach(page, self.LIST_RELATED)
        return page

    def create(self, request, *args, **kwargs):
        data = request.data if isinstance(request.data, dict) else {}
        version = template_versions.create_template(request.user, data.get("name"), data.get("description", ""),
                                                   data.get("spec"), queue=data.get("queue"),
                                                   pod_security_level=data.get("pod_security_level", ""),
                                                   policy_exceptions=data.get("policy_exceptions"))
        template = self.queryset.get(pk=version.template_id)
        return Response(self.get_serializer(template).data, status=status.HTTP_201_CREATED)

    def update(self, request, *args, **kwargs):
        template = self.get_object()
        data = request.data if isinstance(request.data, dict) else {}
        if "spec" in data:
            template_versions.add_version(request.user, template, data["spec"], data.get("description"),
                                         data.get("pod_security_level"), data.get("policy_exceptions"))
        else:
            if "pod_security_level" in data or "policy_exceptions" in data:
                policy.update_template_settings(request.user, template, data.get("pod_security_level"),
                                                data.get("policy_exceptions"))
            if "description" in data:
                template_versions.update_description(request.user, template, data["description"])
        template = self.queryset.get(pk=template.pk)
        return Response(self.get_serializer(template).data)

    def perform_destroy(self, instance):
        template_versions.delete_template(self.request.user, instance)

    @extend_schema(responses=s.TemplateVersionSerializer(many=True))
    @action(detail=True, methods=["get"])
    def versions(self, request, name=None):
        """Every version of the template, newest first."""
        template = self.get_object()
        versions = RuntimeTemplateVersion.objects.filter(template=template).defer("spec").annotate(
            shown_spec=template_service.loadable_spec()).order_by("-version")
        return Response(s.TemplateVersionSerializer(versions, many=True).data)

    @extend_schema(request=None, responses=s.TemplateVersionSerializer)
    @action(detail=True, methods=["post"], url_path=r"versions/(?P<version>[0-9]+)/retire")
    def retire(self, request, name=None, version=None):
        """Retire one version: it takes no new jobs (submit and resubmit answer 400); jobs that used it keep it.
        One-way; retiring it again changes nothing. Managers of the template only."""
        template = self.get_object()
        retired = template_versions.retire_version(request.user, template, int(version))
        retired = RuntimeTemplateVersion.objects.defer("spec").annotate(
            shown_spec=template_service.loadable_spec()).get(pk=retired.pk)
        return Response(s.TemplateVersionSerializer(retired).data)
