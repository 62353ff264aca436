"""The Kubernetes Pod Security Standards, and gangweb's own tenant controls, as pure functions on a pod template.

No maintained Python library encodes the standard (checked: PyPI and public code; the maintained implementations
are the API server's own admission plugin in Go, Kyverno and Gatekeeper policies), so the controls are written
here, each after its upstream check in `k8s.io/pod-security-admission/policy/check_<name>.go` (v0.36.3, the
version of the clusters gangweb is tested against), at that module's *latest* policy version. Control ids are the
upstream `CheckID`s, so an exception or a refusal names the same control as the API server's message does.

Levels (https://kubernetes.io/docs/concepts/security/pod-security-standards/):

- ``baseline``: the BASELINE controls below.
- ``restricted``: baseline plus RESTRICTED; as upstream, `capabilities_restricted` replaces
  `capabilities_baseline`, `restrictedVolumes` replaces `hostPathVolumes`, `seccompProfile_restricted` replaces
  `seccompProfile_baseline` and `procMount_restricted` replaces `procMount` (`OverrideCheckIDs`).

Tenant controls (TENANT, every level) are gangweb's additions: fields that are allowed by the standard but let a
tenant borrow someone else's rights or placement in a cluster shared by teams (see docs/security.md).

Shapes: a pod template is a core/v1 PodTemplateSpec as a dict, ``{"metadata": {...}, "spec": {...}}``; any shape
is tolerated (a malformed field never raises here; template validation or the API server reports it). A field
path is relative to the pod template and names containers and volumes by name, e.g.
``spec.containers[main].securityContext.privileged``.
"""
from __future__ import annotations

from dataclasses import dataclass

BASELINE = "baseline"
RESTRICTED = "restricted"
LEVELS = (BASELINE, RESTRICTED)
TENANT = "tenant"  # gangweb's own controls, at every level

UPSTREAM = "k8s.io/pod-security-admission/policy"


@dataclass(frozen=True)
class Control:
    """One control: `id` (upstream CheckID or gangweb's), `level` (baseline, restricted or tenant), what it
    forbids in a few words, and where its semantics come from."""

    id: str
    level: str
    title: str
    source: str


@dataclass(frozen=True)
class Violation:
    """A refused setting: the `control` id, the `field` path (relative to the pod template) and a message."""

    control: str
    field: str
    message: str


def _up(name: str) -> str:
    return f"{UPSTREAM}/check_{name}.go"


CONTROLS: dict[str, Control] = {c.id: c for c in (
    Control("hostNamespaces", BASELINE, "host network, PID and IPC namespaces", _up("hostNamespaces")),
    Control("privileged", BASELINE, "privileged containers", _up("privileged")),
    Control("capabilities_baseline", BASELINE, "capabilities beyond the default set", _up("capabilities_baseline")),
    Control("hostPathVolumes", BASELINE, "hostPath volumes", _up("hostPathVolumes")),
    Control("hostPorts", BASELINE, "host ports", _up("hostPorts")),
    Control("hostProbesAndHostLifecycle", BASELINE, "a host in probes and lifecycle handlers",
            _up("hostProbesAndhostLifecycle")),
    Control("appArmorProfile", BASELINE, "an AppArmor profile other than RuntimeDefault or Localhost",
            _up("appArmorProfile")),
    Control("seLinuxOptions", BASELINE, "custom SELinux type, user or role", _up("seLinuxOptions")),
    Control("procMount", BASELINE, "an unmasked /proc (outside a user namespace)", _up("procMount_baseline")),
    Control("seccompProfile_baseline", BASELINE, "an Unconfined seccomp profile (field or annotation)",
            _up("seccompProfile_baseline")),
    Control("sysctls", BASELINE, "sysctls outside the safe set", _up("sysctls")),
    Control("windowsHostProcess", BASELINE, "Windows host processes", _up("windowsHostProcess")),
    Control("allowPrivilegeEscalation", RESTRICTED, "allowPrivilegeEscalation not false",
            _up("allowPrivilegeEscalation")),
    Control("capabilities_restricted", RESTRICTED, "capabilities not dropping ALL, or adding more than "
            "NET_BIND_SERVICE", _up("capabilities_restricted")),
    Control("procMount_restricted", RESTRICTED, "an unmasked /proc", _up("procMount_restricted")),
    Control("restrictedVolumes", RESTRICTED, "volume types outside the restricted list", _up("restrictedVolumes")),
    Control("runAsNonRoot", RESTRICTED, "runAsNonRoot not true", _up("runAsNonRoot")),
    Control("runAsUser", RESTRICTED, "runAsUser 0", _up("runAsUser")),
    Control("seccompProfile_restricted", RESTRICTED, "no RuntimeDefault or Localhost seccomp profile",
            _up("seccompProfile_restricted")),
    # gangweb's tenant controls: allowed by the standard, but they borrow another team's rights or placement.
    Control("serviceAccountName", TENANT, "a service account the queue does not allow",
            "gangweb: the pod runs with that account's API rights"),
    Control("automountServiceAccountToken", TENANT, "mounting a service account token the account does not "
            "mount itself", "gangweb: overrides the account's own automountServiceAccountToken"),
    Control("nodeName", TENANT, "a node chosen by the template", "gangweb: bypasses the scheduler, gang and quota"),
    Control("schedulerName", TENANT, "a scheduler chosen by the template",
            "gangweb: the backend sets it; another scheduler bypasses gang and quota"),
    Control("tolerations", TENANT, "tolerating every taint, or the control plane's",
            "gangweb: places pods on nodes kept for others"),
    Control("runtimeClassName", TENANT, "a runtime class chosen by the template",
            "gangweb: a runtime class can carry its own privileges and node placement"),
    Control("volumeTypes", TENANT, "NFS, flexVolume, inline CSI and other node-mounted volume types",
            "gangweb: the node mounts them with its own credentials"),
    Control("priorityClassName", TENANT, "a system- priority class",
            "k8s reserves the prefix (pkg/apis/scheduling SystemPriorityClassPrefix)"),
    Control("deviceVisibilityEnv", TENANT, "environment variables that make a container runtime expose devices "
            "(NVIDIA_VISIBLE_DEVICES and its AMD and Habana peers)",
            "NVIDIA Container Toolkit: accept-nvidia-visible-devices-envvar-when-unprivileged (default true) exposes "
            "the GPUs the variable names, requested or not"),
)}

# deviceVisibilityEnv: variables a container runtime hook reads to decide which devices a container gets. With
# NVIDIA's toolkit defaults, `NVIDIA_VISIBLE_DEVICES=all` in a pod that requests no GPU gives it every GPU of its
# node, outside quota and outside the device plugin's accounting. The device plugin sets the variable itself for
# the GPUs it allocates. `envFrom` cannot be checked here (the values live in the cluster): docs/security.md asks
# cluster admins to turn the toolkit's switch off, which closes that path too.
DEVICE_VISIBILITY_ENV = frozenset({"NVIDIA_VISIBLE_DEVICES", "AMD_VISIBLE_DEVICES", "HABANA_VISIBLE_DEVICES"})
# Literal values that expose no device (NVIDIA Container Toolkit: "void" or empty: none; "none": no GPU, driver
# capabilities only), so setting them is allowed: a pod that asks to see nothing takes nothing.
DEVICE_HIDING_VALUES = ("", "void", "none")

# capabilities_baseline: the container runtime's default set (check_capabilities_baseline.go, capabilities_allowed_1_0)
BASELINE_CAPABILITIES = frozenset({"AUDIT_WRITE", "CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "MKNOD",
                                   "NET_BIND_SERVICE", "SETFCAP", "SETGID", "SETPCAP", "SETUID", "SYS_CHROOT"})
# check_seLinuxOptions.go, selinuxAllowedTypes1_31
SELINUX_TYPES = frozenset({"", "container_t", "container_init_t", "container_kvm_t", "container_engine_t"})
# check_sysctls.go, sysctlsAllowedV1Dot32
SAFE_SYSCTLS = frozenset({
    "kernel.shm_rmid_forced", "net.ipv4.ip_local_port_range", "net.ipv4.tcp_syncookies", "net.ipv4.ping_group_range",
    "net.ipv4.ip_unprivileged_port_start", "net.ipv4.ip_local_reserved_ports", "net.ipv4.tcp_keepalive_time",
    "net.ipv4.tcp_fin_timeout", "net.ipv4.tcp_keepalive_intvl", "net.ipv4.tcp_keepalive_probes",
    "net.ipv4.tcp_rmem", "net.ipv4.tcp_wmem",
})
# check_restrictedVolumes.go: the inline volume sources the restricted level allows
RESTRICTED_VOLUME_SOURCES = frozenset({"configMap", "csi", "downwardAPI", "emptyDir", "ephemeral", "image",
                                       "persistentVolumeClaim", "projected", "secret"})
# volumeTypes (gangweb): the same list without inline CSI; hostPath is hostPathVolumes' to refuse
TENANT_VOLUME_SOURCES = RESTRICTED_VOLUME_SOURCES - {"csi"}
SECCOMP_TYPES = ("RuntimeDefault", "Localhost")  # check_seccompProfile_baseline.go, validSeccomp
APPARMOR_TYPES = ("RuntimeDefault", "Localhost")  # check_appArmorProfile.go, allowedProfileType
APPARMOR_ANNOTATION_PREFIX = "container.apparmor.security.beta.kubernetes.io/"
SECCOMP_POD_ANNOTATION = "seccomp.security.alpha.kubernetes.io/pod"
SECCOMP_CONTAINER_ANNOTATION_PREFIX = "container.seccomp.security.alpha.kubernetes.io/"
CONTAINER_LISTS = ("initContainers", "containers", "ephemeralContainers")  # policy/visitor.go, visitContainers
CONTROL_PLANE_TAINTS = ("node-role.kubernetes.io/control-plane", "node-role.kubernetes.io/master")
DEFAULT_SERVICE_ACCOUNT = "default"

# At restricted, these restricted checks replace the baseline check they override (OverrideCheckIDs upstream).
OVERRIDES = {"capabilities_restricted": "capabilities_baseline", "restrictedVolumes": "hostPathVolumes",
             "seccompProfile_restricted": "seccompProfile_baseline", "procMount_restricted": "procMount"}


def _d(value) -> dict:
    return value if isinstance(value, dict) else {}


def _l(value) -> list:
    return value if isinstance(value, list) else []


def _name(item, index: int) -> str:
    name = item.get("name") if isinstance(item, dict) else None
    return str(name)[:63] if isinstance(name, str) and name else str(index)


def _in(value, allowed) -> bool:
    """`value in allowed` for any JSON value (a list or dict is never a member, and never raises)."""
    return isinstance(value, str) and value in allowed


def _is_zero(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and value == 0


def _short(value) -> str:
    return repr(value)[:80]


class _Pod:
    """Accessors over one pod template, shared by the checks."""

    def __init__(self, template):
        template = _d(template)
        self.meta = _d(template.get("metadata"))
        self.spec = _d(template.get("spec"))
        self.sc = _d(self.spec.get("securityContext"))
        self.annotations = _d(self.meta.get("annotations"))
        self.containers = [(f"spec.{lst}[{_name(c, i)}]", _d(c))
                           for lst in CONTAINER_LISTS for i, c in enumerate(_l(self.spec.get(lst)))]
        # helpers.go, relaxPolicyForUserNamespacePod: hostUsers: false relaxes procMount, runAsNonRoot, runAsUser
        self.user_namespace = self.spec.get("hostUsers") is False
        self.windows = _d(self.spec.get("os")).get("name") == "windows"  # exempts some restricted checks (1.25+)

    def container_scs(self):
        for at, c in self.containers:
            yield at, c, _d(c.get("securityContext"))


# ---- baseline ------------------------------------------------------------------------------------------------------

def _host_namespaces(pod: _Pod):
    for key in ("hostNetwork", "hostPID", "hostIPC"):
        if pod.spec.get(key) is True:
            yield "spec." + key, f"{key}=true shares the host's namespace"


def _privileged(pod: _Pod):
    for at, _c, sc in pod.container_scs():
        if sc.get("privileged") is True:
            yield f"{at}.securityContext.privileged", "must not be true"


def _capabilities_baseline(pod: _Pod):
    for at, _c, sc in pod.container_scs():
        for cap in _l(_d(sc.get("capabilities")).get("add")):
            if not _in(cap, BASELINE_CAPABILITIES):
                yield (f"{at}.securityContext.capabilities.add", f"{_short(cap)} is not in the default set "
                       f"({', '.join(sorted(BASELINE_CAPABILITIES))})")
                break


def _host_path_volumes(pod: _Pod):
    for i, vol in enumerate(_l(pod.spec.get("volumes"))):
        if isinstance(vol, dict) and vol.get("hostPath") is not None:
            yield f"spec.volumes[{_name(vol, i)}].hostPath", "hostPath volumes are not allowed"


def _host_ports(pod: _Pod):
    for at, c in pod.containers:
        for k, port in enumerate(_l(c.get("ports"))):
            if isinstance(port, dict) and port.get("hostPort") not in (None, 0):
                yield f"{at}.ports[{k}].hostPort", f"host port {_short(port.get('hostPort'))} is not allowed"


def _host_probes(pod: _Pod):
    for at, c in pod.containers:
        handlers = [(p, _d(c.get(p))) for p in ("livenessProbe", "readinessProbe", "startupProbe")]
        lifecycle = _d(c.get("lifecycle"))
        handlers += [(f"lifecycle.{h}", _d(lifecycle.get(h))) for h in ("postStart", "preStop")]
        for where, handler in handlers:
            for kind in ("httpGet", "tcpSocket"):
                host = _d(handler.get(kind)).get("host")
                if host not in (None, ""):
                    yield f"{at}.{where}.{kind}.host", "must not name a host (it is reached from the node)"


def _app_armor(pod: _Pod):
    setters = [("spec.securityContext", pod.sc)] + [(f"{at}.securityContext", sc) for at, _c, sc in
                                                    pod.container_scs()]
    for at, sc in setters:
        profile = sc.get("appArmorProfile")
        if profile is not None and _d(profile).get("type") not in APPARMOR_TYPES:
            yield f"{at}.appArmorProfile.type", "must be RuntimeDefault or Localhost"
    for key, value in pod.annotations.items():
        if isinstance(key, str) and key.startswith(APPARMOR_ANNOTATION_PREFIX) and not (
                value in ("", "runtime/default") or (isinstance(value, str) and value.startswith("localhost/"))):
            yield f"metadata.annotations[{key}]", "must be runtime/default or localhost/<profile>"


def _se_linux(pod: _Pod):
    setters = [("spec.securityContext", pod.sc)] + [(f"{at}.securityContext", sc) for at, _c, sc in
                                                    pod.container_scs()]
    for at, sc in setters:
        opts = sc.get("seLinuxOptions")
        if opts is None:
            continue
        opts = _d(opts)
        if not _in(opts.get("type", ""), SELINUX_TYPES):
            yield f"{at}.seLinuxOptions.type", f"must be one of {', '.join(sorted(SELINUX_TYPES - {''}))}"
        for key in ("user", "role"):
            if opts.get(key) not in (None, ""):
                yield f"{at}.seLinuxOptions.{key}", "must not be set"


def _proc_mount(pod: _Pod, relax: bool):
    if relax and pod.user_namespace:
        return
    for at, _c, sc in pod.container_scs():
        if sc.get("procMount") not in (None, "Default"):
            yield f"{at}.securityContext.procMount", "must be Default (the masked /proc)"


def _seccomp_field(pod: _Pod, required: bool):
    pod_set = False
    profile = pod.sc.get("seccompProfile")
    if profile is not None:
        if _d(profile).get("type") not in SECCOMP_TYPES:
            yield "spec.securityContext.seccompProfile.type", "must be RuntimeDefault or Localhost"
        else:
            pod_set = True
    for at, _c, sc in pod.container_scs():
        profile = sc.get("seccompProfile")
        if profile is not None:
            if _d(profile).get("type") not in SECCOMP_TYPES:
                yield f"{at}.securityContext.seccompProfile.type", "must be RuntimeDefault or Localhost"
        elif required and not pod_set:
            yield (f"{at}.securityContext.seccompProfile.type", "must be RuntimeDefault or Localhost (here or in "
                   "spec.securityContext)")


def _seccomp_annotations(pod: _Pod):
    # seccompProfile_baseline 1.0: the deprecated annotations. The API server copies them into the fields when the
    # fields are unset (KEP-135 version skew), so gangweb refuses an unconfined one at every version.
    for key, value in pod.annotations.items():
        if isinstance(key, str) and (key == SECCOMP_POD_ANNOTATION or key.startswith(
                SECCOMP_CONTAINER_ANNOTATION_PREFIX)) and not (
                value in ("runtime/default", "docker/default") or (isinstance(value, str)
                                                                  and value.startswith("localhost/"))):
            yield f"metadata.annotations[{key}]", "must be runtime/default or localhost/<profile>"


def _seccomp_baseline(pod: _Pod):
    yield from _seccomp_field(pod, required=False)
    yield from _seccomp_annotations(pod)


def _sysctls(pod: _Pod):
    for i, sysctl in enumerate(_l(pod.sc.get("sysctls"))):
        name = _d(sysctl).get("name")
        if not _in(name, SAFE_SYSCTLS):
            yield f"spec.securityContext.sysctls[{i}].name", f"{_short(name)} is not in the safe set"


def _windows_host_process(pod: _Pod):
    setters = [("spec.securityContext", pod.sc)] + [(f"{at}.securityContext", sc) for at, _c, sc in
                                                    pod.container_scs()]
    for at, sc in setters:
        if _d(sc.get("windowsOptions")).get("hostProcess") is True:
            yield f"{at}.windowsOptions.hostProcess", "must not be true"


# ---- restricted ----------------------------------------------------------------------------------------------------

def _allow_privilege_escalation(pod: _Pod):
    if pod.windows:
        return
    for at, _c, sc in pod.container_scs():
        if sc.get("allowPrivilegeEscalation") is not False:
            yield f"{at}.securityContext.allowPrivilegeEscalation", "must be false"


def _capabilities_restricted(pod: _Pod):
    if pod.windows:
        return
    for at, _c, sc in pod.container_scs():
        caps = _d(sc.get("capabilities"))
        if "ALL" not in _l(caps.get("drop")):
            yield f"{at}.securityContext.capabilities.drop", 'must include "ALL"'
        extra = [cap for cap in _l(caps.get("add")) if cap != "NET_BIND_SERVICE"]
        if extra:
            yield f"{at}.securityContext.capabilities.add", f"may add only NET_BIND_SERVICE, not {_short(extra[0])}"


def _restricted_volumes(pod: _Pod):
    for i, vol in enumerate(_l(pod.spec.get("volumes"))):
        vol = _d(vol)
        present = [k for k, v in vol.items() if k != "name" and v is not None]
        # no source at all is defaulted to emptyDir by the API server (core/v1 SetDefaults_Volume)
        if present and not any(k in RESTRICTED_VOLUME_SOURCES for k in present):
            kind = present[0]
            yield f"spec.volumes[{_name(vol, i)}].{kind}", (
                f"volume type {kind} is not allowed; use {', '.join(sorted(RESTRICTED_VOLUME_SOURCES))}")


def _run_as_non_root(pod: _Pod):
    if pod.user_namespace:
        return
    pod_value = pod.sc.get("runAsNonRoot")
    if pod_value is not None and pod_value is not True:
        yield "spec.securityContext.runAsNonRoot", "must be true"
    for at, _c, sc in pod.container_scs():
        value = sc.get("runAsNonRoot")
        if value is not None:
            if value is not True:
                yield f"{at}.securityContext.runAsNonRoot", "must be true"
        elif pod_value is not True:
            yield f"{at}.securityContext.runAsNonRoot", "must be true (here or in spec.securityContext)"


def _run_as_user(pod: _Pod):
    if pod.user_namespace:
        return
    if _is_zero(pod.sc.get("runAsUser")):
        yield "spec.securityContext.runAsUser", "must not be 0 (root)"
    for at, _c, sc in pod.container_scs():
        if _is_zero(sc.get("runAsUser")):
            yield f"{at}.securityContext.runAsUser", "must not be 0 (root)"


def _seccomp_restricted(pod: _Pod):
    if pod.windows:
        return
    yield from _seccomp_field(pod, required=True)


CHECKS = {
    "hostNamespaces": _host_namespaces,
    "privileged": _privileged,
    "capabilities_baseline": _capabilities_baseline,
    "hostPathVolumes": _host_path_volumes,
    "hostPorts": _host_ports,
    "hostProbesAndHostLifecycle": _host_probes,
    "appArmorProfile": _app_armor,
    "seLinuxOptions": _se_linux,
    "procMount": lambda pod: _proc_mount(pod, relax=True),
    "seccompProfile_baseline": _seccomp_baseline,
    "sysctls": _sysctls,
    "windowsHostProcess": _windows_host_process,
    "allowPrivilegeEscalation": _allow_privilege_escalation,
    "capabilities_restricted": _capabilities_restricted,
    "procMount_restricted": lambda pod: _proc_mount(pod, relax=False),
    "restrictedVolumes": _restricted_volumes,
    "runAsNonRoot": _run_as_non_root,
    "runAsUser": _run_as_user,
    "seccompProfile_restricted": _seccomp_restricted,
}


def controls_at(level: str) -> list[str]:
    """The standard's control ids that run at `level` ("baseline" or "restricted"), upstream overrides applied.
    Raises ValueError for another level."""
    if level not in LEVELS:
        raise ValueError(f"unknown Pod Security level {level!r}")
    ids = [c.id for c in CONTROLS.values() if c.level == BASELINE or (level == RESTRICTED and c.level == RESTRICTED)]
    if level == RESTRICTED:
        ids = [i for i in ids if i not in OVERRIDES.values()]
    return ids


def check_standard(template, level: str, exceptions=()) -> list[Violation]:
    """Violations of the Pod Security Standard `level` by one pod template (PodTemplateSpec dict), in control
    order, skipping the control ids in `exceptions`. Empty when the API server's PodSecurity admission would admit
    the pod in a namespace labelled `pod-security.kubernetes.io/enforce=<level>` (latest version); the seccomp
    annotations are also refused at every version (see `_seccomp_annotations`)."""
    pod = _Pod(template)
    out = []
    for control in controls_at(level):
        if control in exceptions:
            continue
        out.extend(Violation(control, path, msg) for path, msg in CHECKS[control](pod))
    return out


def stricter(*levels: str) -> str:
    """The strictest of `levels` ("" ignored); "baseline" when none is given."""
    return RESTRICTED if RESTRICTED in levels else BASELINE
