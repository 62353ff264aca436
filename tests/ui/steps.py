"""Dashboard steps shared by the browser tests (tests/ui/) and the browser flow against the control plane
(tests/cluster/test_dashboard_flow.py). Logging in is `browser.log_in` (and the `admin_page` fixture)."""
from pathlib import Path

# A runtime template as a user pastes it into the template form: one pod set of two pods, one GPU each, with the
# replicas and resources overridable at submit time.
SPEC_YAML = """backend: k8s-workload
gang: {scheduleTimeoutSeconds: 60}
podSets:
- name: worker
  replicas: 2
  template:
    spec:
      containers:
      - name: main
        image: registry.example/train:1
        resources:
          requests: {cpu: "1", memory: 1Gi, nvidia.com/gpu: "1"}
          limits: {nvidia.com/gpu: "1"}
overridable: [podSets.*.replicas, podSets.*.resources]
"""


def register_cluster(page, name: str, kubeconfig: Path | str) -> None:
    """Register a cluster through /clusters/new/ by uploading a kubeconfig file; returns on its detail page."""
    page.goto("/clusters/new/")
    page.get_by_label("Name").fill(name)
    page.get_by_label("kubeconfig file").set_input_files(str(kubeconfig))
    page.get_by_role("button", name="Register").click()
    page.wait_for_url(f"**/clusters/{name}/")


def create_queue(page, name: str, gpu_quota: str, cluster: str, namespaces: str = "default") -> None:
    """Create a queue through /queues/new/ with a GPU quota (GPUs) on one cluster, allowing `namespaces`
    (comma-separated); returns on the queue list."""
    page.goto("/queues/new/")
    page.get_by_label("Name", exact=True).fill(name)
    page.get_by_label("GPU quota").fill(gpu_quota)
    page.get_by_label("Clusters").select_option(cluster)
    page.get_by_label("Allowed namespaces").fill(namespaces)
    page.get_by_role("button", name="Create queue").click()
    page.wait_for_url("**/queues/")
