"""The Helm chart (charts/gangweb): `helm lint`, `helm template` with the default values (bundled PostgreSQL and
Redis, generated secrets) and with ci/ha-values.yaml (3 replicas, external PostgreSQL and Redis, secrets by
reference), the rendered objects checked for what an operator relies on, and every object sent to the real control
plane as a server-side dry-run create (strict field validation, in a namespace that enforces and warns on the Pod
Security Standards "restricted" level), which must accept it without a warning.

Helm is the one localcluster/build.sh builds from the Go module proxy (HELM_VERSION of localcluster/versions.env).
Without it these tests skip, unless GANGWEB_TEST_REQUIRE_HELM=1 or CI is set (.ci/run sets it): then they fail.
"""
from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
import yaml
from kubernetes import client, dynamic
from kubernetes.client.rest import ApiException

import localcluster

CHART = Path(__file__).resolve().parents[2] / "charts" / "gangweb"
HA_VALUES = CHART / "ci" / "ha-values.yaml"
DEV_VALUES = CHART / "ci" / "dev-values.yaml"  # bundled stores, secrets generated (secrets.generateForDevelopment)
PROCESSES = ("web", "worker", "webhooks", "beat", "watcher")
RELEASE = "gw"


@pytest.fixture(scope="module")
def helm(tmp_path_factory) -> list[str]:
    """argv prefix of the built Helm, with its cache/config/data in a temporary home."""
    path = localcluster.find_helm()
    if not (path.is_file() and os.access(path, os.X_OK)):
        message = f"helm is not built at {path}: run localcluster/build.sh (it builds Helm beside the control plane)"
        if os.environ.get("GANGWEB_TEST_REQUIRE_HELM") == "1" or os.environ.get("CI"):
            pytest.fail(message, pytrace=False)
        pytest.skip(message)
    home = tmp_path_factory.mktemp("helm-home")
    for var in ("HELM_CACHE_HOME", "HELM_CONFIG_HOME", "HELM_DATA_HOME"):
        os.environ[var] = str(home / var.lower())
    return [str(path)]


def run_helm(helm: list[str], *args: str) -> str:
    done = subprocess.run([*helm, *args], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, f"helm {' '.join(args)} failed:\n{done.stdout}\n{done.stderr}"
    return done.stdout


def render(helm: list[str], namespace: str, *values: Path, release: str = RELEASE) -> list[dict]:
    """The chart's objects as `helm template` renders them (hooks included), in document order."""
    args = ["template", release, str(CHART), "--namespace", namespace]
    for v in values:
        args += ["-f", str(v)]
    return [d for d in yaml.safe_load_all(run_helm(helm, *args)) if d]


def by_kind(objects: list[dict], kind: str) -> dict[str, dict]:
    return {o["metadata"]["name"]: o for o in objects if o["kind"] == kind}


def env_of(container: dict) -> dict[str, dict]:
    return {e["name"]: e for e in container.get("env", [])}


@pytest.mark.parametrize("values", [(DEV_VALUES,), (HA_VALUES,)], ids=["default", "ha"])
def test_helm_lint_passes_strictly(helm, values):
    args = ["lint", "--strict", str(CHART)]
    for v in values:
        args += ["-f", str(v)]
    out = run_helm(helm, *args)
    assert "1 chart(s) linted, 0 chart(s) failed" in out


@pytest.mark.parametrize("values", [(DEV_VALUES,), (HA_VALUES,)], ids=["default", "ha"])
def test_every_process_is_a_deployment_with_probes_resources_and_a_restricted_security_context(helm, values):
    objects = render(helm, "gangweb", *values)
    deployments = by_kind(objects, "Deployment")
    assert {f"gw-gangweb-{p}" for p in PROCESSES} <= set(deployments)
    for name, d in deployments.items():
        pod = d["spec"]["template"]["spec"]
        assert pod["securityContext"]["runAsNonRoot"] is True, name
        assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}, name
        for c in pod["containers"] + pod.get("initContainers", []):
            where = f"{name}/{c['name']}"
            assert c["resources"]["requests"]["cpu"] and c["resources"]["limits"]["memory"], where
            sc = c["securityContext"]
            assert sc["allowPrivilegeEscalation"] is False and sc["capabilities"] == {"drop": ["ALL"]}, where
            assert sc["readOnlyRootFilesystem"] is True, where
        for c in pod["containers"]:
            assert "readinessProbe" in c and "livenessProbe" in c, f"{name}/{c['name']} lacks a probe"
        if name == "gw-gangweb-redis":
            continue  # the bundled single Redis (for trying) has nothing to spread
        # Each process spreads its replicas over nodes, and a drain takes one at a time.
        term = pod["affinity"]["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"][0]
        assert term["podAffinityTerm"]["labelSelector"]["matchLabels"] == d["spec"]["selector"]["matchLabels"]
    pdbs = by_kind(objects, "PodDisruptionBudget")
    for p in PROCESSES:
        pdb = pdbs[f"gw-gangweb-{p}"]
        assert pdb["spec"]["maxUnavailable"] == 1
        assert pdb["spec"]["selector"] == deployments[f"gw-gangweb-{p}"]["spec"]["selector"]


def test_the_processes_run_what_docker_and_runstack_run(helm):
    deployments = by_kind(render(helm, "gangweb", HA_VALUES), "Deployment")

    def command(p):
        return deployments[f"gw-gangweb-{p}"]["spec"]["template"]["spec"]["containers"][0]["command"]

    assert command("web")[:2] == ["gunicorn", "gangweb.wsgi"] and "gthread" in command("web")
    assert command("worker")[:4] == ["celery", "-A", "gangweb", "worker"]
    assert command("worker")[command("worker").index("-Q") + 1] == "celery"
    assert command("webhooks")[command("webhooks").index("-Q") + 1] == "webhooks"
    assert command("beat")[:4] == ["celery", "-A", "gangweb", "beat"]
    assert "--scheduler=scheduling.work.beat:LeasedScheduler" in command("beat")
    assert command("watcher") == ["python", "manage.py", "watch_clusters"]
    web = deployments["gw-gangweb-web"]["spec"]["template"]["spec"]["containers"][0]
    assert web["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert web["livenessProbe"]["httpGet"]["path"] == "/healthz"


def test_a_worker_pool_consumes_only_its_shard_queues_and_the_default_worker_the_rest(helm, tmp_path):
    pools = tmp_path / "pools.yaml"
    pools.write_text(yaml.safe_dump({"worker": {"shards": "0-5"}, "workerPools": [
        {"name": "east", "shards": [6, 7], "replicas": 2, "concurrency": 3,
         "resources": {"requests": {"cpu": "100m", "memory": "256Mi"}}}]}))
    objects = render(helm, "gangweb", HA_VALUES, pools)
    deployments = by_kind(objects, "Deployment")
    east = deployments["gw-gangweb-worker-east"]["spec"]
    command = east["template"]["spec"]["containers"][0]["command"]
    assert command[command.index("-Q") + 1] == "reconcile.6,reconcile.7" and "--concurrency=3" in command
    assert east["replicas"] == 2
    worker = deployments["gw-gangweb-worker"]["spec"]["template"]["spec"]["containers"][0]
    assert worker["command"][worker["command"].index("-Q") + 1] == "celery"
    assert {"name": "GANGWEB_WORKER_SHARDS", "value": "0-5"} in worker["env"]
    assert "gw-gangweb-worker-east" in by_kind(objects, "PodDisruptionBudget")
    default = by_kind(render(helm, "gangweb", HA_VALUES), "Deployment")["gw-gangweb-worker"]
    assert {"name": "GANGWEB_WORKER_SHARDS", "value": "all"} in default["spec"]["template"]["spec"]["containers"][0][
        "env"]


def test_ha_values_run_three_replicas_on_external_services_with_every_secret_by_reference(helm):
    objects = render(helm, "gangweb", HA_VALUES)
    deployments = by_kind(objects, "Deployment")
    assert {n: d["spec"]["replicas"] for n, d in deployments.items()} == {f"gw-gangweb-{p}": 3 for p in PROCESSES}
    assert by_kind(objects, "StatefulSet") == {} and by_kind(objects, "Secret") == {}  # nothing bundled or generated
    env = env_of(deployments["gw-gangweb-worker"]["spec"]["template"]["spec"]["containers"][0])
    assert env["SECRET_KEY"]["valueFrom"]["secretKeyRef"] == {"name": "gangweb-secrets", "key": "SECRET_KEY"}
    assert env["GANGWEB_ENCRYPTION_KEYS"]["valueFrom"]["secretKeyRef"] == {
        "name": "gangweb-secrets", "key": "GANGWEB_ENCRYPTION_KEYS"}
    assert env["GANGWEB_DATABASE_PASSWORD"]["valueFrom"]["secretKeyRef"] == {"name": "gangweb-db", "key": "password"}
    assert env["DATABASE_URL"]["value"] == (
        "postgres://gangweb:$(GANGWEB_DATABASE_PASSWORD)@gangweb-pg-rw.databases.svc:5432/gangweb?sslmode=require")
    assert env["REDIS_URL"]["valueFrom"]["secretKeyRef"] == {"name": "gangweb-redis", "key": "url"}
    assert env["GANGWEB_NAMESPACE"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.namespace"
    # No plain-text secret anywhere in the rendered manifests.
    assert not [e for e in env.values() if e["name"] in ("SECRET_KEY", "GANGWEB_ENCRYPTION_KEYS") and "value" in e]


@pytest.mark.parametrize("values,hook", [
    ((DEV_VALUES,), "post-install,pre-upgrade"),  # bundled PostgreSQL and chart-made secrets exist after install
    ((HA_VALUES,), "pre-install,pre-upgrade"),
], ids=["default", "ha"])
def test_migrations_run_as_a_hook_job_and_nothing_that_owns_others_is_a_hook(helm, values, hook):
    objects = render(helm, "gangweb", *values)
    hooks = {(o["kind"], o["metadata"]["name"]): o["metadata"]["annotations"]
             for o in objects if "helm.sh/hook" in o["metadata"].get("annotations", {})}
    assert list(hooks) == [("Job", "gw-gangweb-migrate")]
    annotations = hooks[("Job", "gw-gangweb-migrate")]
    assert annotations["helm.sh/hook"] == hook
    assert annotations["helm.sh/hook-delete-policy"] == "before-hook-creation"
    job = by_kind(objects, "Job")["gw-gangweb-migrate"]
    assert job["spec"]["template"]["spec"]["containers"][0]["command"] == ["python", "manage.py", "migrate",
                                                                           "--noinput"]
    init = {d: [c["name"] for c in o["spec"]["template"]["spec"].get("initContainers", [])]
            for d, o in by_kind(objects, "Deployment").items() if o["metadata"]["labels"].get(
                "app.kubernetes.io/component") in PROCESSES}
    # After-install migrations: the pods wait for them; before-install ones need no wait.
    assert set(map(tuple, init.values())) == ({("wait-for-migrations",)} if values == (DEV_VALUES,) else {()})


def test_cluster_scoped_names_carry_the_namespace_so_two_installs_never_collide(helm):
    a = render(helm, "team-a", HA_VALUES)
    b = render(helm, "team-b", HA_VALUES)
    cluster_scoped = {"ClusterRole", "ClusterRoleBinding"}
    names_a = {(o["kind"], o["metadata"]["name"]) for o in a if o["kind"] in cluster_scoped}
    names_b = {(o["kind"], o["metadata"]["name"]) for o in b if o["kind"] in cluster_scoped}
    assert names_a == {("ClusterRole", "gw-gangweb-team-a"), ("ClusterRoleBinding", "gw-gangweb-team-a")}
    assert names_a.isdisjoint(names_b)
    binding = by_kind(a, "ClusterRoleBinding")["gw-gangweb-team-a"]
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "gw-gangweb", "namespace": "team-a"}]
    # In-cluster mode mounts the ServiceAccount's token; without it gangweb gets neither a token nor cluster rights.
    assert all(d["spec"]["template"]["spec"]["automountServiceAccountToken"] is True
               for d in by_kind(a, "Deployment").values())
    plain = render(helm, "team-a", DEV_VALUES)
    assert not [o for o in plain if o["kind"] in cluster_scoped]
    assert all(d["spec"]["template"]["spec"].get("automountServiceAccountToken") in (False, None)
               for d in by_kind(plain, "Deployment").values())


def dry_run_create(api: client.ApiClient, resources, obj: dict, namespace: str) -> list[str]:
    """POST `obj` with dryRun=All and fieldValidation=Strict; returns the server's Warning headers. Raises
    ApiException when the server refuses it."""
    resource = resources.get(api_version=obj["apiVersion"], kind=obj["kind"])
    path = resource.path(namespace=namespace if resource.namespaced else None)
    response = api.call_api(path, "POST", {}, [("dryRun", "All"), ("fieldValidation", "Strict")],
                            {"Content-Type": "application/json", "Accept": "application/json"}, body=obj,
                            auth_settings=["BearerToken"], _preload_content=False, _return_http_data_only=False)
    raw = response[0] if isinstance(response, tuple) else response  # the urllib3 response (not preloaded)
    status, headers = raw.status, raw.headers
    assert status == 201, f"{obj['kind']}/{obj['metadata']['name']}: HTTP {status}"
    created = json.loads(raw.data)
    assert created["metadata"]["name"] == obj["metadata"]["name"]
    return [v for k, v in headers.items() if k.lower() == "warning"]


@pytest.mark.cluster
@pytest.mark.parametrize("values", [(DEV_VALUES,), (HA_VALUES,)], ids=["default", "ha"])
def test_the_control_plane_accepts_every_rendered_object_in_a_restricted_namespace(helm, kube_api, kube_namespace,
                                                                                 values):
    core = client.CoreV1Api(kube_api)
    level = "restricted"
    core.patch_namespace(kube_namespace, {"metadata": {"labels": {
        "pod-security.kubernetes.io/enforce": level, "pod-security.kubernetes.io/warn": level}}})
    objects = render(helm, kube_namespace, *values)
    resources = dynamic.DynamicClient(kube_api).resources
    accepted, refused, warned = [], [], []
    for obj in objects:
        label = f"{obj['kind']}/{obj['metadata']['name']}"
        try:
            warnings = dry_run_create(kube_api, resources, obj, kube_namespace)
        except ApiException as exc:
            refused.append(f"{label}: {exc.status} {exc.body}")
            continue
        accepted.append(label)
        warned += [f"{label}: {w}" for w in warnings]
    assert refused == []
    assert warned == []  # a pod template that breaks "restricted" gets a PodSecurity warning here
    kinds = {a.split("/")[0] for a in accepted}
    assert {"Deployment", "Service", "PodDisruptionBudget", "Job", "ServiceAccount", "Role", "RoleBinding",
            "NetworkPolicy"} <= kinds
    assert ({"ClusterRole", "ClusterRoleBinding", "Ingress"} <= kinds) == (values == (HA_VALUES,))
    assert ({"StatefulSet", "Secret"} <= kinds) == (values == (DEV_VALUES,))
    assert len(accepted) == len(objects)
    # A Job's pods are created by the Job controller, where the namespace's enforce level refuses a violation; the
    # migration's pod spec goes through the same admission as a Pod now.
    job = by_kind(objects, "Job")["gw-gangweb-migrate"]
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "migrate-pod"},
           "spec": job["spec"]["template"]["spec"]}
    assert dry_run_create(kube_api, resources, pod, kube_namespace) == []


# --- issue 32 row 8: a chart that is safe by default -----------------------------------------------------------------

def test_row8_a_render_without_existing_secret_fails_unless_the_dev_flag_is_set(helm):
    done = subprocess.run([*helm, "template", RELEASE, str(CHART), "--namespace", "gangweb"], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode != 0 and "secrets.existingSecret is required" in done.stderr
    # With the operator's Secret, two renders are the same to the byte: a GitOps sync changes no key.
    first = run_helm(helm, "template", RELEASE, str(CHART), "--namespace", "gangweb", "-f", str(HA_VALUES))
    assert first == run_helm(helm, "template", RELEASE, str(CHART), "--namespace", "gangweb", "-f", str(HA_VALUES))
    assert "Secret" in {o["kind"] for o in render(helm, "gangweb", DEV_VALUES)}  # only the dev flag generates them


def test_row8_every_component_has_a_network_policy(helm):
    objects = render(helm, "gangweb", DEV_VALUES)
    policies = by_kind(objects, "NetworkPolicy")
    assert set(policies) == {f"gw-gangweb-{c}" for c in ("web", "worker", "webhooks", "beat", "postgresql", "redis")}
    selected = {}
    for name, policy in policies.items():
        spec = policy["spec"]
        assert spec["policyTypes"] == ["Ingress", "Egress"], name
        exprs = spec["podSelector"].get("matchExpressions") or []
        selected[name] = exprs[0]["values"] if exprs else [spec["podSelector"]["matchLabels"][
            "app.kubernetes.io/component"]]
    deployments = {o["spec"]["template"]["metadata"]["labels"]["app.kubernetes.io/component"]
                   for o in objects if o["kind"] in ("Deployment", "StatefulSet", "Job")}
    assert deployments == {c for components in selected.values() for c in components}  # every pod is covered
    web = policies["gw-gangweb-web"]["spec"]
    assert web["ingress"] == [{"from": [{"namespaceSelector": {"matchLabels": {
        "kubernetes.io/metadata.name": "ingress-nginx"}}}], "ports": [{"port": 8000, "protocol": "TCP"}]}]
    for name in ("worker", "webhooks", "beat"):
        assert policies[f"gw-gangweb-{name}"]["spec"]["ingress"] == [], name  # nothing reaches them
    def egress_ports(name):
        return {p["port"] for rule in policies[f"gw-gangweb-{name}"]["spec"]["egress"] for p in rule.get("ports", [])}

    assert {443, 6443, 5432, 6379, 53} <= egress_ports("worker")
    assert not {443, 6443} & egress_ports("beat")  # only the processes that talk to clusters
    for store, port in (("postgresql", 5432), ("redis", 6379)):
        spec = policies[f"gw-gangweb-{store}"]["spec"]
        [rule] = spec["ingress"]
        [peer] = rule["from"]
        assert peer["podSelector"]["matchLabels"] == {"app.kubernetes.io/name": "gangweb",
                                                      "app.kubernetes.io/instance": RELEASE}
        assert peer["podSelector"]["matchExpressions"] == [
            {"key": "app.kubernetes.io/component", "operator": "NotIn", "values": ["postgresql", "redis"]}]
        assert rule["ports"] == [{"port": port, "protocol": "TCP"}] and spec["egress"] == []


def test_row8_the_bundled_redis_requires_a_password_that_gangweb_sends(helm):
    objects = render(helm, "gangweb", DEV_VALUES)
    redis = by_kind(objects, "Deployment")["gw-gangweb-redis"]["spec"]["template"]["spec"]["containers"][0]
    assert redis["command"][-2:] == ["--requirepass", "$(REDISCLI_AUTH)"]
    assert env_of(redis)["REDISCLI_AUTH"]["valueFrom"]["secretKeyRef"] == {"name": "gw-gangweb-secrets",
                                                                          "key": "REDIS_PASSWORD"}
    web = env_of(by_kind(objects, "Deployment")["gw-gangweb-web"]["spec"]["template"]["spec"]["containers"][0])
    assert web["REDIS_URL"]["value"] == "redis://:$(GANGWEB_REDIS_PASSWORD)@gw-gangweb-redis:6379/0"
    assert list(web).index("GANGWEB_REDIS_PASSWORD") < list(web).index("REDIS_URL")  # $(VAR) needs it defined first
    assert (web["GANGWEB_WAITS_PER_PROCESS"]["value"], web["GANGWEB_WAITS_PER_USER"]["value"]) == ("8", "4")


def test_row8_the_cluster_role_is_exactly_what_the_code_calls(helm):
    from scheduling.kube import rbac

    [role] = by_kind(render(helm, "gangweb", HA_VALUES), "ClusterRole").values()
    assert role["rules"] == rbac.as_policy_rules()
    pods = [r for r in role["rules"] if "pods" in r["resources"]]
    assert pods == [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]}]


@pytest.mark.parametrize("values", [(DEV_VALUES,), (HA_VALUES,)], ids=["default", "ha"])
def test_row10_every_gangweb_container_shares_one_redis_so_limits_are_never_per_process(helm, values):
    """Without Redis the throttles and the bulk quota count per process (docs/security.md); the chart always gives
    every gangweb container a REDIS_URL (bundled or external), and a render without any Redis fails."""
    objects = render(helm, "gangweb", *values)
    for o in objects:
        if o["kind"] in ("Deployment", "Job") and o["metadata"]["labels"].get("app.kubernetes.io/component") in (
                *PROCESSES, "migrate"):
            for c in o["spec"]["template"]["spec"]["containers"]:
                assert "REDIS_URL" in env_of(c), f"{o['metadata']['name']}/{c['name']}"
    done = subprocess.run([*helm, "template", RELEASE, str(CHART), "-f", str(DEV_VALUES), "--set",
                           "redisServer.bundled.enabled=false"], capture_output=True, text=True, timeout=120)
    assert done.returncode != 0 and "redis.url or redis.urlSecret.name" in done.stderr
