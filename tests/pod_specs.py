"""Pod templates that each exercise one Pod Security control, allowed and refused, shared by the unit tests and the
agreement test against the API server's PodSecurity admission (tests/cluster/test_pod_security_agreement.py).

Each case: (id, level, the control(s) refused or None, pod template); `refused(control)` gives them as a set.
`pod()` builds a minimal valid pod template (one container "main") and applies changes: `spec` keys, `sc` (the
container's securityContext), `pod_sc` (the pod's securityContext), `container` (other container keys),
`annotations`.
"""
from __future__ import annotations

import copy

RESTRICTED_OK_SC = {"allowPrivilegeEscalation": False, "runAsNonRoot": True, "capabilities": {"drop": ["ALL"]},
                    "seccompProfile": {"type": "RuntimeDefault"}}


def pod(spec=None, sc=None, pod_sc=None, container=None, annotations=None, restricted=False) -> dict:
    """A pod template (PodTemplateSpec dict). `restricted=True` starts from a container that meets restricted."""
    c = {"name": "main", "image": "registry.example/train:1"}
    base_sc = copy.deepcopy(RESTRICTED_OK_SC) if restricted else {}
    if sc:
        base_sc.update(sc)
    if base_sc:
        c["securityContext"] = base_sc
    c.update(container or {})
    template = {"metadata": {"labels": {"app": "psa"}}, "spec": {"containers": [c]}}
    if annotations:
        template["metadata"]["annotations"] = annotations
    if pod_sc:
        template["spec"]["securityContext"] = pod_sc
    template["spec"].update(spec or {})
    return template


def _probe(**handler):
    return {"livenessProbe": {"httpGet": {"port": 8080, "path": "/", **handler}}}


B, R = "baseline", "restricted"

# Every baseline control refused and allowed, then every restricted control refused and allowed.
CASES = [
    ("default pod", B, None, pod()),
    ("hostNetwork", B, "hostNamespaces", pod(spec={"hostNetwork": True})),
    ("hostPID", B, "hostNamespaces", pod(spec={"hostPID": True})),
    ("hostIPC", B, "hostNamespaces", pod(spec={"hostIPC": True})),
    ("hostNetwork false", B, None, pod(spec={"hostNetwork": False, "hostPID": False, "hostIPC": False})),
    ("privileged", B, "privileged", pod(sc={"privileged": True})),
    ("privileged false", B, None, pod(sc={"privileged": False})),
    ("add SYS_ADMIN", B, "capabilities_baseline", pod(sc={"capabilities": {"add": ["SYS_ADMIN"]}})),
    ("add NET_RAW", B, "capabilities_baseline", pod(sc={"capabilities": {"add": ["NET_RAW"]}})),
    ("add default caps", B, None, pod(sc={"capabilities": {"add": ["CHOWN", "NET_BIND_SERVICE", "SETUID"]}})),
    ("hostPath volume", B, "hostPathVolumes",
     pod(spec={"volumes": [{"name": "root", "hostPath": {"path": "/"}}]})),
    ("emptyDir volume", B, None, pod(spec={"volumes": [{"name": "scratch", "emptyDir": {}}]})),
    ("hostPort", B, "hostPorts", pod(container={"ports": [{"containerPort": 22, "hostPort": 22}]})),
    ("containerPort only", B, None, pod(container={"ports": [{"containerPort": 22}]})),
    ("probe host", B, "hostProbesAndHostLifecycle", pod(container=_probe(host="169.254.169.254"))),
    ("probe without host", B, None, pod(container=_probe())),
    ("preStop host", B, "hostProbesAndHostLifecycle",
     pod(container={"lifecycle": {"preStop": {"httpGet": {"port": 80, "host": "10.0.0.1"}}}})),
    ("AppArmor Unconfined field", B, "appArmorProfile", pod(sc={"appArmorProfile": {"type": "Unconfined"}})),
    ("AppArmor Unconfined pod field", B, "appArmorProfile", pod(pod_sc={"appArmorProfile": {"type": "Unconfined"}})),
    ("AppArmor unconfined annotation", B, "appArmorProfile",
     pod(annotations={"container.apparmor.security.beta.kubernetes.io/main": "unconfined"})),
    ("AppArmor RuntimeDefault", B, None, pod(sc={"appArmorProfile": {"type": "RuntimeDefault"}})),
    ("AppArmor runtime/default annotation", B, None,
     pod(annotations={"container.apparmor.security.beta.kubernetes.io/main": "runtime/default"})),
    ("SELinux spc_t", B, "seLinuxOptions", pod(sc={"seLinuxOptions": {"type": "spc_t"}})),
    ("SELinux user", B, "seLinuxOptions", pod(pod_sc={"seLinuxOptions": {"user": "system_u"}})),
    ("SELinux role", B, "seLinuxOptions", pod(sc={"seLinuxOptions": {"role": "system_r"}})),
    ("SELinux container_t level", B, None, pod(sc={"seLinuxOptions": {"type": "container_t", "level": "s0:c1,c2"}})),
    ("procMount Unmasked", B, "procMount", pod(sc={"procMount": "Unmasked"})),
    ("procMount Default", B, None, pod(sc={"procMount": "Default"})),
    ("seccomp Unconfined", B, "seccompProfile_baseline", pod(sc={"seccompProfile": {"type": "Unconfined"}})),
    ("seccomp Unconfined pod", B, "seccompProfile_baseline", pod(pod_sc={"seccompProfile": {"type": "Unconfined"}})),
    ("seccomp RuntimeDefault", B, None, pod(pod_sc={"seccompProfile": {"type": "RuntimeDefault"}})),
    ("sysctl kernel.msgmax", B, "sysctls", pod(pod_sc={"sysctls": [{"name": "kernel.msgmax", "value": "65536"}]})),
    ("sysctl net.core.somaxconn", B, "sysctls",
     pod(pod_sc={"sysctls": [{"name": "net.core.somaxconn", "value": "1024"}]})),
    ("safe sysctl", B, None, pod(pod_sc={"sysctls": [{"name": "net.ipv4.ip_local_port_range",
                                                       "value": "1024 65535"}]})),
    ("windows hostProcess", B, ("hostNamespaces", "windowsHostProcess"),
     pod(pod_sc={"windowsOptions": {"hostProcess": True}}, spec={"hostNetwork": True, "os": {"name": "windows"}})),
    ("windows hostProcess false", B, None, pod(sc={"windowsOptions": {"hostProcess": False}})),
    # restricted
    ("restricted: compliant", R, None, pod(restricted=True)),
    ("restricted: default pod", R, ("allowPrivilegeEscalation", "capabilities_restricted", "runAsNonRoot",
                                    "seccompProfile_restricted"), pod()),
    ("restricted: allowPrivilegeEscalation true", R, "allowPrivilegeEscalation",
     pod(restricted=True, sc={"allowPrivilegeEscalation": True})),
    ("restricted: no drop ALL", R, "capabilities_restricted",
     pod(restricted=True, sc={"capabilities": {"drop": ["NET_RAW"]}})),
    ("restricted: add CHOWN", R, "capabilities_restricted",
     pod(restricted=True, sc={"capabilities": {"drop": ["ALL"], "add": ["CHOWN"]}})),
    ("restricted: add NET_BIND_SERVICE", R, None,
     pod(restricted=True, sc={"capabilities": {"drop": ["ALL"], "add": ["NET_BIND_SERVICE"]}})),
    ("restricted: runAsNonRoot false", R, "runAsNonRoot", pod(restricted=True, sc={"runAsNonRoot": False})),
    ("restricted: runAsNonRoot on the pod", R, None,
     pod(restricted=True, sc={"runAsNonRoot": None}, pod_sc={"runAsNonRoot": True})),
    ("restricted: runAsUser 0", R, "runAsUser", pod(restricted=True, sc={"runAsUser": 0})),
    ("restricted: runAsUser 1000", R, None, pod(restricted=True, sc={"runAsUser": 1000})),
    ("restricted: no seccomp", R, "seccompProfile_restricted", pod(restricted=True, sc={"seccompProfile": None})),
    ("restricted: seccomp Localhost", R, None,
     pod(restricted=True, sc={"seccompProfile": {"type": "Localhost", "localhostProfile": "p.json"}})),
    ("restricted: NFS volume", R, "restrictedVolumes",
     pod(restricted=True, spec={"volumes": [{"name": "data", "nfs": {"server": "10.0.0.2", "path": "/"}}]})),
    ("restricted: hostPath volume", R, "restrictedVolumes",
     pod(restricted=True, spec={"volumes": [{"name": "root", "hostPath": {"path": "/"}}]})),
    ("restricted: configMap and PVC volumes", R, None,
     pod(restricted=True, spec={"volumes": [{"name": "cfg", "configMap": {"name": "c"}},
                                            {"name": "data", "persistentVolumeClaim": {"claimName": "d"}}]})),
    ("restricted: procMount Unmasked", R, "procMount_restricted",
     pod(restricted=True, sc={"procMount": "Unmasked"}, spec={"hostUsers": False})),
    ("baseline: procMount Unmasked in a user namespace", B, None,
     pod(sc={"procMount": "Unmasked"}, spec={"hostUsers": False})),
]


def strip_none(value):
    """The template with None values removed (the cases use None to delete a key of the restricted base)."""
    if isinstance(value, dict):
        return {k: strip_none(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [strip_none(v) for v in value]
    return value


CASES = [(name, level, control, strip_none(template)) for name, level, control, template in CASES]


def refused(control) -> set[str]:
    """The expected refused controls of a case as a set (empty: the pod is allowed)."""
    if control is None:
        return set()
    return set(control) if isinstance(control, tuple) else {control}
