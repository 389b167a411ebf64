from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("monitor", "0024_endpoint_local"),
    ]

    operations = [
        migrations.AddField(
            model_name="case",
            name="agent",
            field=models.JSONField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="sample",
            name="turn",
            field=models.PositiveSmallIntegerField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="sample",
            name="step",
            field=models.PositiveSmallIntegerField(default=0),
        ),
        migrations.AddField(
            model_name="sample",
            name="calls",
            field=models.JSONField(blank=True, null=True),
        ),
    ]
