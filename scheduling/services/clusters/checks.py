"""Cluster writes shared by the API and the dashboard: the kubeconfig rules and the fields only platform admins
may change.

- `check_kubeconfig`: a kubeconfig being stored follows `kube.kubeconfig_policy` (data only, never code or file
  paths) and its server's addresses follow `scheduling.security.addresses` (the install's
  GANGWEB_ALLOW_PRIVATE_CLUSTER_ADDRESSES). The client factory checks both again on every use.
- `scheduler_names`: a change of a cluster's scheduler names (`Cluster.scheduler_names`), checked and merged over
  what is stored: families that name a scheduler, DNS-1123 subdomain values (what the API server accepts as a pod's
  `spec.schedulerName`).
- `check_platform_fields`: `in_cluster` (gangweb's own service account, with the platform's rights) and `name`
  (how every queue, job and audit entry refers to the cluster) are the platform admin's to change (issue 15, M6),
  and so are its shard queue and client rate limit (`work_shard`, `api_qps`, `api_burst`; issue 18).
"""
from __future__ import annotations

from django.core.exceptions import ValidationError

from ...backends import registry
from ...kube import kubeconfig_policy
from ...security import addresses
from .. import validation as v
from ..access import roles as access
from ..errors import PermissionDenied

# work_shard, api_qps and api_burst decide which worker pool's slots a cluster's tasks hold, and for how long (a
# task waits for its client rate limit's tokens): a cluster admin could otherwise crowd other teams' clusters.
PLATFORM_FIELDS = ("in_cluster", "name", "work_shard", "api_qps", "api_burst")


def scheduler_names(value, current: dict | None = None) -> dict[str, str]:
    """The cluster's scheduler names after applying `value` ({family: name}) over `current` (the stored ones, else
    the defaults): a name replaces that family's, an empty name or null brings back the plugin's default.

    Raises ValidationError naming the field: {"scheduler_names": "must be an object ..."},
    {"scheduler_names.slurm": "is not a backend that names a scheduler ..."},
    {"scheduler_names.kai": "'Kai Scheduler' is not a DNS-1123 subdomain"} (Kubernetes validates a pod's
    `spec.schedulerName` as a DNS-1123 subdomain: pkg/apis/core/validation ValidatePodSpec)."""
    defaults = registry.scheduler_names()
    if not isinstance(value, dict):
        raise ValidationError({"scheduler_names": f"must be an object of backend family -> scheduler name, such as "
                                                  f"{defaults}"})
    out = {**defaults, **{k: v for k, v in (current or {}).items() if k in defaults}}
    for family, name in value.items():
        field = f"scheduler_names.{str(family)[:40]}"
        if family not in defaults:
            raise ValidationError({field: f"is not a backend that names a scheduler; choose from "
                                          f"{', '.join(sorted(defaults))}"})
        out[family] = defaults[family] if name in (None, "") else v.dns_subdomain(name, field)
    return out


def check_kubeconfig(data: dict, cluster=None) -> None:
    """Validate the kubeconfig a create or update would store (`data["kubeconfig"]`, else the stored one when the
    context changes) for the context it would use. Raises ValidationError({"kubeconfig.users[0].user.exec": ...})
    or ({"kubeconfig.clusters[0].cluster.server": "... is a loopback address ..."}), ({"context": ...}).

    A host name that does not resolve now is accepted (the cluster then reports Unreachable); the client factory
    resolves and checks it again before every connection it builds."""
    if "kubeconfig" not in data and "context" not in data:
        return
    text = data["kubeconfig"] if "kubeconfig" in data else (cluster.kubeconfig if cluster else "")
    if not text:
        return  # no kubeconfig (cleared, or an in-cluster cluster): nothing to check
    context = data["context"] if "context" in data else (cluster.context if cluster else "")
    try:
        connection = kubeconfig_policy.validate(text or "", context or "")
    except kubeconfig_policy.KubeconfigRefused as exc:
        raise ValidationError({exc.field: exc.message}) from None
    try:
        kubeconfig_policy.resolve_server(connection)
    except addresses.AddressRefused as exc:
        raise ValidationError({connection.server_field: str(exc)}) from None
    except OSError:
        pass


def check_platform_fields(user, cluster, data: dict) -> None:
    """Raise PermissionDenied ({"in_cluster": "only platform admins may change ..."}) when `user` is not a platform
    admin and `data` changes a field of PLATFORM_FIELDS on `cluster`."""
    if access.is_platform_admin(user):
        return
    for field in PLATFORM_FIELDS:
        if field in data and data[field] != getattr(cluster, field):
            raise PermissionDenied({field: f"only platform admins may change a cluster's {field}"})
