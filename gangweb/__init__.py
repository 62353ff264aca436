"""gangweb: a control plane for gang-scheduled AI/ML jobs on Kubernetes."""
from .celery import app as celery_app

__all__ = ("celery_app",)
