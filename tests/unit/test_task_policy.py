"""The Celery tasks own the retry and requeue policy (issue 20): a pass returns how it ended, the task decides what
follows, and nothing below scheduling/tasks.py imports it (work is queued by task name through
scheduling.work.enqueue)."""
import ast
from pathlib import Path

import pytest

from scheduling import tasks
from scheduling.kube.errors import TerminalKubeError, TransientKubeError
from scheduling.reconcile.jobs import PassResult
from scheduling.work import enqueue

PACKAGE = Path(tasks.__file__).parent


@pytest.mark.parametrize(("requeue_after", "waits", "countdown"), [
    (None, 0, None),  # done: nothing follows
    (5, 0, 5),  # the pass's own countdown first
    (5, 1, 10),  # then doubled per wait
    (5, 5, 160),
    (1, 5, 32),
    (60, 3, 300),  # never more than five minutes
    (5, 6, None),  # six waits in a row: the periodic resync takes over
])
def test_a_requeue_comes_back_after_a_doubling_capped_countdown_a_bounded_number_of_times(requeue_after, waits,
                                                                                         countdown):
    assert tasks.requeue_countdown(PassResult(requeue_after=requeue_after), waits) == countdown


def test_only_a_transient_error_is_worth_a_retry():
    assert PassResult(error=TransientKubeError("ClusterUnreachable", "down")).transient
    assert not PassResult(error=TerminalKubeError("Invalid", "no")).transient
    assert not PassResult(requeue_after=5).transient


def test_the_task_names_the_port_sends_are_the_registered_ones():
    registered = {tasks.reconcile_job.name, tasks.reconcile_jobs.name, tasks.reconcile_queue.name,
                  tasks.sync_queues.name, tasks.deliver_webhook.name}
    assert registered == {enqueue.RECONCILE_JOB, enqueue.RECONCILE_JOBS, enqueue.RECONCILE_QUEUE,
                          enqueue.SYNC_QUEUES, enqueue.DELIVER_WEBHOOK}
    assert enqueue.RECONCILE_JOB == "scheduling.reconcile_job"  # stable: routes and queued messages name it


def _imports_of(path: Path) -> set[str]:
    """Absolute names of the modules (and `from` targets) a file imports anywhere, function bodies included."""
    module = ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    package = module.rsplit(".", 1)[0] if path.name != "__init__.py" else module
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = package.split(".")
            base = base[:len(base) - node.level + 1] if node.level else []
            target = ".".join([*base, *([node.module] if node.module else [])])
            found.add(target)
            found |= {f"{target}.{alias.name}" for alias in node.names}
    return found


def test_nothing_below_the_tasks_module_imports_it():
    importers = [str(p.relative_to(PACKAGE.parent)) for p in PACKAGE.rglob("*.py")
                 if p.name != "tasks.py" and "migrations" not in p.parts and "scheduling.tasks" in _imports_of(p)]
    assert importers == []
