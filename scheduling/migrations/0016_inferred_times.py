from django.db import migrations, models


class Migration(migrations.Migration):
    """PhaseTransition.inferred: a timeline time gangweb could only infer (issue 19, part 3)."""

    dependencies = [("scheduling", "0015_cluster_nodes_priority_classes")]

    operations = [
        migrations.AddField(
            model_name="phasetransition",
            name="inferred",
            field=models.BooleanField(
                default=False, help_text="`at` is not the cluster's own timestamp for this event (gangweb inferred "
                "it from a weaker one); such entries are left out of the latency histograms"),
        ),
    ]
