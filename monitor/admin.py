"""Admin: where teams add endpoints, pairs, suites, alert rules and channels by hand.

Schedules are django-celery-beat's PeriodicTask rows, in the admin under "Periodic tasks".
"""

from django.contrib import admin, messages

from monitor import models
from monitor.services.channels import send_test


@admin.register(models.Endpoint)
class EndpointAdmin(admin.ModelAdmin):
    list_display = ("name", "protocol", "base_url", "model", "api_key_env", "simulated")
    search_fields = ("name", "model", "base_url")


class CaseInline(admin.TabularInline):
    model = models.Case
    extra = 0
    fields = ("key", "category", "scenario", "difficulty", "max_tokens")


@admin.register(models.Suite)
class SuiteAdmin(admin.ModelAdmin):
    list_display = ("name", "version", "description")
    inlines = [CaseInline]


@admin.register(models.Case)
class CaseAdmin(admin.ModelAdmin):
    list_display = ("key", "suite", "category", "scenario", "difficulty")
    list_filter = ("suite", "category", "scenario")


@admin.register(models.Pair)
class PairAdmin(admin.ModelAdmin):
    list_display = ("name", "fast", "base", "suite", "claimed_speedup", "active")


@admin.register(models.Run)
class RunAdmin(admin.ModelAdmin):
    list_display = ("id", "pair", "kind", "trigger", "status", "completed", "planned", "created_at")
    list_filter = ("status", "kind", "pair")
    readonly_fields = ("summary",)


@admin.register(models.Sample)
class SampleAdmin(admin.ModelAdmin):
    list_display = ("id", "run", "tier", "case", "ok", "error_class", "ttft_ms", "e2e_ms")
    list_filter = ("tier", "ok", "error_class")


@admin.register(models.Channel)
class ChannelAdmin(admin.ModelAdmin):
    list_display = ("name", "kind", "target", "disabled", "last_error")
    actions = ["send_test_notification"]

    @admin.action(description="Send a test notification")
    def send_test_notification(self, request, queryset):
        for channel in queryset.order_by("pk"):
            attempt = send_test(channel_id=channel.pk, user=request.user.get_username())
            if attempt.ok:
                self.message_user(request, f"{channel.name}: test sent", messages.SUCCESS)
            else:
                self.message_user(request, f"{channel.name}: test failed: {attempt.error}",
                                  messages.ERROR)


@admin.register(models.AlertRule)
class AlertRuleAdmin(admin.ModelAdmin):
    list_display = (
        "name",
        "pair",
        "metric",
        "tier",
        "op",
        "threshold",
        "last_k",
        "min_n",
        "enabled",
    )


@admin.register(models.Alert)
class AlertAdmin(admin.ModelAdmin):
    list_display = ("id", "rule", "pair", "opened_at", "resolved_at", "message")


@admin.register(models.Notification)
class NotificationAdmin(admin.ModelAdmin):
    list_display = ("id", "channel", "subject", "ok", "error", "created_at")


@admin.register(models.ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    """Listed and revoked here; made only by ``manage.py api_token create`` (shown once)."""

    list_display = ("prefix", "user", "name", "created_at", "last_used_at")
    readonly_fields = ("user", "prefix", "created_at", "last_used_at")
    fields = ("user", "name", "prefix", "created_at", "last_used_at")

    def has_add_permission(self, request) -> bool:
        return False
