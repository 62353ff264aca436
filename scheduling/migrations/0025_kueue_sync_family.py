"""Queue state rows of a third family, kueue (issue 37: a policy's Kueue Cohort or ClusterQueue per cluster,
reconcile/kueue_queues.py). Only the field's choices change: no table change, no data moved."""
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("scheduling", "0024_i34_queue_state")]

    operations = [
        migrations.AlterField(
            model_name="queueclusterstate", name="family",
            field=models.CharField(choices=[("kai", "KAI"), ("volcano", "Volcano"), ("kueue", "Kueue")],
                                   default="kai", max_length=16)),
    ]
