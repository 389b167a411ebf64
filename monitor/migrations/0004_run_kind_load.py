"""Run status, kind and trigger as choices; load probes become kind "load".

Load probes used to be stored as kind "probe" with trigger "load", so every trend query had to
remember to leave them out; now the kind says what they are and the trigger says who asked.
"""

from django.db import migrations, models


def load_trigger_to_kind(apps, schema_editor):
    Run = apps.get_model("monitor", "Run")
    Run.objects.filter(trigger="load").update(kind="load", trigger="manual")


def kind_to_load_trigger(apps, schema_editor):
    Run = apps.get_model("monitor", "Run")
    Run.objects.filter(kind="load").update(kind="probe", trigger="load")


class Migration(migrations.Migration):
    dependencies = [("monitor", "0003_report_archive")]

    operations = [
        migrations.AlterField(
            model_name="run",
            name="kind",
            field=models.CharField(
                choices=[
                    ("probe", "probe (temperature 0)"),
                    ("audit", "audit (temperature 1)"),
                    ("load", "load probe (concurrency levels)"),
                ],
                default="probe",
                max_length=16,
            ),
        ),
        migrations.AlterField(
            model_name="run",
            name="trigger",
            field=models.CharField(
                choices=[("manual", "Manual"), ("scheduled", "Scheduled")],
                default="manual",
                max_length=16,
            ),
        ),
        migrations.AlterField(
            model_name="run",
            name="status",
            field=models.CharField(
                choices=[
                    ("queued", "Queued"),
                    ("running", "Running"),
                    ("done", "Done"),
                    ("failed", "Failed"),
                ],
                db_index=True,
                default="queued",
                max_length=16,
            ),
        ),
        migrations.RunPython(load_trigger_to_kind, kind_to_load_trigger),
    ]
