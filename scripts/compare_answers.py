"""Render every dashboard page and API answer (GET) on the browser tests' demo data set into a directory, so two
trees (say main and a branch) can be compared byte for byte: `diff -r out-main out-branch`.

Usage (from a checkout's root, with the project's virtualenv):

    python scripts/compare_answers.py OUTDIR

What it does, the same way in every tree:
- a fresh SQLite database in a temporary directory (migrated here; the settings' own database is never touched),
  and Django's clock (`django.utils.timezone.now`) frozen at FROZEN_AT, so stored times, ages and auto_now
  fields are the same in every run;
- the demo data of the screenshots (tests/ui/demo.py `populate`, as a platform admin), with each job's `uid`
  set to a UUID made of its id (uuid4 otherwise), and the showcased job's events from the demo
  (`demo.events`: the demo cluster has no API server), as tests/ui/test_screenshots.py has them; plus a few
  jobs whose status the status writer derives from recorded objects (`observe`), so that the reconcile side's
  answers are compared too;
- GETs, logged in as that admin: every dashboard page of scheduling/urls.py that takes no argument, or one per
  demo object (queue, job, template, cluster), a few list variants (grouped, filtered, sorted), and under
  /api/v1/ every list, detail and GET action of every registered viewset, for every object of the demo data;
- writes each answer's body to OUTDIR/<path and query, slashes as "__">.txt, after NORMALIZE (per-request
  tokens: CSRF tokens and CSP nonces), and OUTDIR/index.txt with one line per request: status, content type,
  path.

Nothing here is timed. Exit status 0 once every file is written (an answer with status 4xx/5xx is written too:
the comparison decides).
"""
from __future__ import annotations

import os
import re
import sys
import tempfile
import uuid
from datetime import UTC, datetime
from pathlib import Path
from unittest import mock

ROOT = Path(__file__).resolve().parent.parent
FROZEN_AT = datetime(2026, 12, 1, 12, 0, 0, tzinfo=UTC)
NORMALIZE = [  # (pattern, replacement): what differs between two requests of the same tree
    (re.compile(r'(name="csrfmiddlewaretoken" value=")[^"]+'), r"\1<csrf>"),
    (re.compile(r'(name="csrf-token" content=")[^"]+'), r"\1<csrf>"),
    (re.compile(r'("X-CSRFToken":\s*")[^"]+'), r"\1<csrf>"),
    (re.compile(r'(nonce=")[^"]+'), r"\1<nonce>"),
]


def setup(workdir: Path) -> None:
    """Point Django at a fresh SQLite database in `workdir` and start it."""
    sys.path.insert(0, str(ROOT))
    os.environ["DATABASE_URL"] = f"sqlite:///{workdir / 'answers.sqlite3'}"
    os.environ.setdefault("GANGWEB_TESTING", "1")
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gangweb.settings")
    os.environ.pop("REDIS_URL", None)
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0, interactive=False)


def populate():
    """The demo data set; returns (admin user, showcased job)."""
    from django.contrib.auth import get_user_model

    from scheduling.models import GangJob
    from tests.ui import demo

    admin = get_user_model().objects.create_superuser("admin", "admin@example.com", "pw-admin-123")
    showcase = demo.populate(admin)
    for pk in GangJob.objects.order_by("pk").values_list("pk", flat=True):
        GangJob.objects.filter(pk=pk).update(uid=uuid.UUID(int=pk))
    return admin, showcase


def observe(admin) -> None:
    """Jobs whose status comes from the status writer (`reconcile.status`) fed with recorded objects
    (tests/kube_objects.py) of the demo cluster, so the derived fields (phase, reasons, timeline, why-pending,
    `observed`) are part of the comparison: a gang the scheduler cannot place, a running one, a finished one, one
    whose owner Job was recreated, and one whose cluster is unreachable."""
    from datetime import timedelta

    from scheduling.backends.k8s_workload_v1alpha2 import K8sWorkloadV1alpha2
    from scheduling.models import Cluster, GangJob, QueuePolicy, RuntimeTemplateVersion
    from scheduling.reconcile import status
    from tests import builders
    from tests.kube_objects import T0, batch_job, pod, v1alpha2_podgroup

    cluster, queue = Cluster.objects.get(name="local"), QueuePolicy.objects.get(name="nlp-eval")
    template = RuntimeTemplateVersion.objects.filter(template__name="vit-finetune").latest("version")
    base = (FROZEN_AT - T0).total_seconds() - 900  # seconds after T0: 15 minutes before the frozen clock
    backend = K8sWorkloadV1alpha2()

    def job(name):
        made = builders.make_job(template, queue, cluster, name=name, user=admin,
                                 at=FROZEN_AT - timedelta(seconds=960))
        GangJob.objects.filter(pk=made.pk).update(backend_plugin=backend.name, uid=uuid.UUID(int=10_000 + made.pk))
        return GangJob.objects.select_related("cluster", "queue").get(pk=made.pk)

    def gang(j, scheduled=None):
        return [v1alpha2_podgroup(name=status.current_gang_name(j), created=base + 1, min_count=2,
                                  scheduled=scheduled)]

    stuck = job("observed-unschedulable")
    status.apply_observation(stuck, backend, gang(stuck, ("False", "Unschedulable", "0/4 nodes fit the gang",
                                                          base + 5)),
                             [pod(name=f"stuck-{i}", created=base + 2, unschedulable="0/4 nodes are available: "
                                  "4 Insufficient nvidia.com/gpu.") for i in range(2)],
                             [batch_job(name="stuck-worker", created=base + 1)])
    running = job("observed-running")
    pods = [pod(name=f"run-{i}", created=base + 2, bound=base + 30, started=base + 40) for i in range(2)]
    status.apply_observation(running, backend, gang(running, ("True", "Scheduled", "", base + 30)), pods,
                             [batch_job(name="run-worker", created=base + 1)])
    status.record_restart(running, T0 + timedelta(seconds=base + 300), "Job default/run-worker", "Recreated",
                          "recreated what was missing from the cluster: Job default/run-worker")
    done = job("observed-succeeded")
    pods = [pod(name=f"done-{i}", created=base + 2, bound=base + 10, started=base + 12, finished=base + 400)
            for i in range(2)]
    status.apply_observation(done, backend, gang(done, ("True", "Scheduled", "", base + 10)), pods,
                             [batch_job(name="done-worker", created=base + 1, complete=base + 401)])
    lost = job("observed-unreachable")
    status.record_error(lost, "ClusterUnreachable", "connection refused (10.0.0.1:6443)", None)


def dashboard_paths() -> list[str]:
    """Every dashboard page that takes no argument, then one per demo object, then list variants."""
    from django.urls import reverse

    from scheduling import urls as dashboard_urls
    from scheduling.models import Cluster, GangJob, QueuePolicy, RuntimeTemplate

    def page(name, *args):
        return reverse(f"{dashboard_urls.app_name}:{name}", args=args)

    paths = [page(p.name) for p in dashboard_urls.urlpatterns if p.name and not p.pattern.converters]
    for name in QueuePolicy.objects.order_by("name").values_list("name", flat=True):
        paths += [page("queue", name), page("queue-children", name)]
    for pk in GangJob.objects.order_by("pk").values_list("pk", flat=True):
        paths += [page(view, pk) for view in ("job", "job-live", "job-events", "job-objects")]
    for name in RuntimeTemplate.objects.order_by("name").values_list("name", flat=True):
        paths += [page("template", name), page("template-edit", name)]
    for name in Cluster.objects.order_by("name").values_list("name", flat=True):
        paths.append(page("cluster", name))
    jobs = page("jobs")
    paths += [f"{jobs}?group={g}" for g in ("queue", "cluster", "phase")]
    paths += [f"{jobs}?phase=Queued", f"{jobs}?sort=-submitted", f"{jobs}?name=vit", f"{jobs}?group=nope"]
    return paths


def api_paths() -> list[str]:
    """Under /api/v1/: the root, and per registered viewset its list, GET list actions, and per object of the
    demo data its detail and GET detail actions."""
    from django.urls import reverse

    from scheduling.api.urls import router
    from scheduling.models import AuditEvent, Cluster, GangJob, QueuePolicy, RuntimeTemplate

    keys = {  # basename: the lookup values of the demo's objects
        "cluster": list(Cluster.objects.order_by("name").values_list("name", flat=True)),
        "queue": list(QueuePolicy.objects.order_by("name").values_list("name", flat=True)),
        "template": list(RuntimeTemplate.objects.order_by("name").values_list("name", flat=True)),
        "job": list(GangJob.objects.order_by("pk").values_list("pk", flat=True)),
        "audit": list(AuditEvent.objects.order_by("pk").values_list("pk", flat=True)[:20]),
    }
    paths = [reverse("api-root")]
    for _prefix, viewset, basename in router.registry:
        actions = [a for a in viewset.get_extra_actions() if "get" in a.mapping]
        paths.append(reverse(f"{basename}-list"))
        paths += [reverse(f"{basename}-{a.url_name}") for a in actions if not a.detail]
        for key in keys.get(basename, []):
            paths.append(reverse(f"{basename}-detail", args=[key]))
            paths += [reverse(f"{basename}-{a.url_name}", args=[key]) for a in actions if a.detail]
    return paths


def file_name(path: str) -> str:
    """A flat file name for a request path with its query."""
    name = path.strip("/").replace("/", "__").replace("?", "@").replace("&", "+") or "root"
    return re.sub(r"[^A-Za-z0-9_.@+=-]", "_", name) + ".txt"


def normalize(body: str) -> str:
    """`body` with the per-request tokens of NORMALIZE replaced."""
    for pattern, replacement in NORMALIZE:
        body = pattern.sub(replacement, body)
    return body


def main(out: Path) -> int:
    with tempfile.TemporaryDirectory(prefix="compare-answers-") as tmp, \
            mock.patch("django.utils.timezone.now", return_value=FROZEN_AT):
        setup(Path(tmp))
        from django.test import Client

        from scheduling.services.jobs import events
        from tests.ui import demo

        admin, showcase = populate()
        observe(admin)
        client = Client(HTTP_HOST="localhost")
        client.force_login(admin)
        out.mkdir(parents=True, exist_ok=True)
        index = []
        with mock.patch.object(events, "job_events",
                               lambda j, api=None: demo.events(j) if j.pk == showcase.pk else []):
            for path in [*dashboard_paths(), *api_paths()]:
                answer = client.get(path, HTTP_ACCEPT="text/html" if not path.startswith("/api/") else
                                    "application/json")
                body = answer.content.decode("utf-8", "replace")
                (out / file_name(path)).write_text(normalize(body))
                index.append(f"{answer.status_code} {answer.get('Content-Type', '')} {path}")
        (out / "index.txt").write_text("\n".join(index) + "\n")
        print(f"{len(index)} answers written to {out}")
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    sys.exit(main(Path(sys.argv[1]).resolve()))
