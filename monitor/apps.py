from django.apps import AppConfig
from django.db.models.signals import post_migrate

from monitor.setup.roles import ensure_roles


def sync_roles(sender: AppConfig, **kwargs: object) -> None:
    """After every ``migrate``: the roles' permissions include models added since the roles'
    data migration. Django creates permissions on this same signal, for every app before this
    one (``monitor`` is listed last), so they exist when this runs."""
    ensure_roles(kwargs.get("apps") or sender.apps)


class MonitorConfig(AppConfig):
    name = "monitor"
    default_auto_field = "django.db.models.BigAutoField"
    verbose_name = "tierwatch"

    def ready(self) -> None:
        post_migrate.connect(sync_roles, sender=self, dispatch_uid="monitor.sync_roles")
        # The pages' cache is refreshed after every run's end through this registry, so the
        # run layer never imports the web layer (monitor.derived.run_end).
        from monitor.derived.run_end import register_warmer
        from monitor.web.page_figures import warm

        register_warmer(warm)
