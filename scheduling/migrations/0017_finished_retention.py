from datetime import timedelta

from django.conf import settings
from django.db import migrations, models
from django.db.models import F
from django.db.models.functions import Coalesce


def schedule_existing(apps, schema_editor):
    """Rows that finished before retention existed: their Jobs and pods (never removed until now) are removed after
    the default retention counted from when they finished; a cancelled or refused job's objects are already gone."""
    GangJob = apps.get_model("scheduling", "GangJob")
    keep = timedelta(seconds=getattr(settings, "GANGWEB_FINISHED_RETENTION_SECONDS", 3600))
    GangJob.objects.filter(phase__in=["Succeeded", "Failed"], remove_after__isnull=True).update(
        remove_after=Coalesce(F("finished_at"), F("updated_at")) + keep)
    GangJob.objects.filter(phase="Cancelled", cleaned_up_at__isnull=False).update(objects_removed_at=F("cleaned_up_at"))


class Migration(migrations.Migration):

    dependencies = [
        ('scheduling', '0016_inferred_times'),
    ]

    operations = [
        migrations.AddField(
            model_name='gangjob',
            name='remove_after',
            field=models.DateTimeField(blank=True, db_index=True, help_text="when the finished job's Jobs and pods are removed", null=True),
        ),
        migrations.AddField(
            model_name='gangjob',
            name='objects_removed_at',
            field=models.DateTimeField(blank=True, help_text="when a pass found none of the job's objects left", null=True),
        ),
        migrations.RunPython(schedule_existing, migrations.RunPython.noop),
    ]
