"""``python manage.py localcluster up|down|status|build``: the local Kubernetes 1.36 control plane.

A thin wrapper: the flags and the work live in the ``localcluster`` package (``localcluster/cli.py``), which also
runs without Django as ``python -m localcluster``. See docs/local-cluster.md.
"""

from django.core.management.base import BaseCommand, CommandError

from localcluster import cli


class Command(BaseCommand):
    """Start, stop, report on or build the local control plane (etcd, apiserver, scheduler, KCM, kwok)."""

    help = "Start (up), stop (down), report on (status) or build the local Kubernetes 1.36 control plane."

    def add_arguments(self, parser):
        """Same flags as ``python -m localcluster``: action, --state-dir, --nodes, --gpus-per-node, ..."""
        cli.add_arguments(parser)

    def handle(self, *args, **options):
        """Run the action; a non-zero result becomes a CommandError (exit status 1)."""
        code = cli.run(options, out=self.stdout, err=self.stderr)
        if code and options["action"] != "status":
            raise CommandError(f"localcluster {options['action']} failed")
        if code:
            raise SystemExit(code)
