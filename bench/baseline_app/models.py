"""One table: a submitted body stored as-is."""
from django.db import models


class BaselineRow(models.Model):
    """A job body stored without validation: what "insert one row" costs through Django and DRF."""

    name = models.CharField(max_length=63)
    body = models.JSONField()
    created_at = models.DateTimeField(auto_now_add=True)
