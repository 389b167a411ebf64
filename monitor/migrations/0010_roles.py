"""The viewer, operator and admin groups (``monitor.setup.roles``). Permissions are normally created
after every migration has run, so they are created here first; running it twice changes
nothing."""

from django.contrib.auth.management import create_permissions
from django.db import migrations

from monitor.setup.roles import ensure_roles


def forwards(apps, schema_editor):
    for app_config in apps.get_app_configs():
        app_config.models_module = True
        create_permissions(app_config, apps=apps, verbosity=0)
        app_config.models_module = None
    ensure_roles(apps)


class Migration(migrations.Migration):
    dependencies = [
        ("monitor", "0009_api_token"),
        ("auth", "0012_alter_user_first_name_max_length"),
        ("contenttypes", "0002_remove_content_type_name"),
        ("django_celery_beat", "0019_alter_periodictasks_options"),
        ("admin", "0003_logentry_add_action_flag_choices"),
        ("sessions", "0001_initial"),
        ("axes", "0010_accessattemptexpiration"),
    ]

    operations = [migrations.RunPython(forwards, migrations.RunPython.noop)]
