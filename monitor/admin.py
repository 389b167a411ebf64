"""Admin: where teams add endpoints, pairs, suites, alert rules and channels by hand.

Schedules are django-celery-beat's PeriodicTask rows, in the admin under "Periodic tasks".
Every configuration admin (``AuditedAdmin``) writes its adds, changes and deletes to the audit
log with the fields that changed (``monitor.setup.audit``), shown at /audit/.
"""

from django import forms
from django.contrib import admin, messages
from django_celery_beat.admin import PeriodicTaskAdmin
from django_celery_beat.models import PeriodicTask

from evals.presets import PRESETS
from monitor import models
from monitor.alerting.channels import send_test
from monitor.setup import audit, connection, pair_defaults


class AuditedAdmin(admin.ModelAdmin):
    """Records each save and delete as a ``ConfigChange``. The snapshot after is taken in
    ``save_related``, once many-to-many fields (a rule's channels) are saved too."""

    def save_model(self, request, obj, form, change):
        stored = type(obj).objects.filter(pk=obj.pk).first() if change else None
        request._audit_before = audit.snapshot(stored)
        super().save_model(request, obj, form, change)

    def save_related(self, request, form, formsets, change):
        super().save_related(request, form, formsets, change)
        audit.record(
            obj=form.instance,
            before=getattr(request, "_audit_before", {}),
            after=audit.snapshot(form.instance),
            source="admin",
            user=request.user,
        )

    def delete_model(self, request, obj):
        before = audit.snapshot(obj)
        super().delete_model(request, obj)
        audit.record(obj=obj, before=before, after={}, source="admin", user=request.user)

    def delete_queryset(self, request, queryset):
        for obj in queryset:
            self.delete_model(request, obj)


admin.site.unregister(PeriodicTask)


@admin.register(PeriodicTask)
class AuditedPeriodicTaskAdmin(AuditedAdmin, PeriodicTaskAdmin):
    """Schedules: django-celery-beat's admin, audited."""


class EndpointForm(forms.ModelForm):
    """The endpoint with a preset to choose: picked (on a new endpoint, or changed on a stored
    one), it fills the protocol, base URL, body, headers and served-tier fields on save
    (``Endpoint.apply_preset``, as config files do); the fields changed in this form win."""

    preset = forms.ChoiceField(
        required=False,
        choices=[("", "— none: set the fields below by hand —")]
        + [(p.name, f"{p.name}: {p.title}") for p in PRESETS.values()],
        help_text=models.Endpoint._meta.get_field("preset").help_text,
    )

    class Meta:
        model = models.Endpoint
        fields = "__all__"

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["base_url"].required = False  # a preset may fill it; the model checks it

    def clean(self):
        data = super().clean()
        if data.get("preset") and (self.instance.pk is None or "preset" in self.changed_data):
            # what the user set: a field changed in this form and not left at its default
            blank = models.Endpoint()
            given = {
                f: data[f]
                for f in self.changed_data
                if f in data and f != "preset" and data[f] != getattr(blank, f, None)
            }
            given["model"] = data.get("model")
            data.update(models.Endpoint(preset=data["preset"]).apply_preset(given))
        if not data.get("base_url") and "base_url" not in self.errors:
            self.add_error("base_url", "Required, unless the chosen preset sets it.")
        return data


@admin.register(models.Endpoint)
class EndpointAdmin(AuditedAdmin):
    form = EndpointForm

    def get_fields(self, request, obj=None):
        """The preset right under the name: the first choice, and it fills most fields below."""
        fields = super().get_fields(request, obj)
        return sorted(fields, key=lambda f: f not in ("name", "preset"))

    list_display = ("name", "protocol", "preset", "base_url", "model", "api_key_env", "simulated")
    search_fields = ("name", "model", "base_url")
    actions = ["test_connection"]

    @admin.action(description="Test connection (one short request to each selected endpoint)")
    def test_connection(self, request, queryset):
        """What each endpoint answered, as a message per endpoint (``monitor.setup.connection``);
        an audit-log entry each, nothing else stored."""
        checks = [connection.check(endpoint) for endpoint in queryset[:20]]
        connection.record(checks, user=request.user, source="admin")
        for check in checks:
            level = messages.SUCCESS if check.ok else messages.ERROR
            self.message_user(request, f"{check.endpoint}: {check.summary}", level)


class CaseInline(admin.TabularInline):
    model = models.Case
    extra = 0
    fields = ("key", "category", "scenario", "difficulty", "max_tokens")


@admin.register(models.Suite)
class SuiteAdmin(AuditedAdmin):
    list_display = ("name", "version", "description")
    inlines = [CaseInline]


@admin.register(models.Case)
class CaseAdmin(admin.ModelAdmin):
    list_display = ("key", "suite", "category", "scenario", "difficulty")
    list_filter = ("suite", "category", "scenario")


class PairForm(forms.ModelForm):
    """The pair with its schedules: a pair saved without one never runs, so the form asks
    for both cadences with the README's defaults (empty: no scheduled runs of that kind)."""

    probe_every_minutes = forms.IntegerField(
        required=False,
        min_value=1,
        initial=pair_defaults.PROBE_EVERY_MIN,
        help_text="A probe (temperature 0, timings, pass rates) every N minutes. Empty: no "
        "scheduled probes; the pair runs only when started by hand.",
    )
    audit_every_hours = forms.IntegerField(
        required=False,
        min_value=1,
        initial=pair_defaults.AUDIT_EVERY_H,
        help_text="An audit (temperature 1, the same-model test) every N hours. Empty: no "
        "audits, so no answer to 'same model?'.",
    )

    class Meta:
        model = models.Pair
        fields = "__all__"

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        pair_defaults.sync_suites()  # the built-in suites to choose from, synced if missing
        for name in ("claim_metric", "claim_form"):  # defaults when left out of the post
            if name in self.fields:
                self.fields[name].required = False
        self.fields["suite"].queryset = models.Suite.objects.order_by("name", "-version")
        if self.instance.pk:  # an existing pair: its schedules as they are
            every = pair_defaults.schedules(self.instance.name)
            probe, audit = every["probe"], every["audit"]
            self.initial["probe_every_minutes"] = probe // 60 if probe else None
            self.initial["audit_every_hours"] = audit // 3600 if audit else None

    def clean_claim_metric(self) -> str:
        """Empty (a form that does not show it): the model's default, E2E."""
        return self.cleaned_data.get("claim_metric") or "e2e"

    def clean_claim_form(self) -> str:
        return self.cleaned_data.get("claim_form") or "factor"

    def every_s(self) -> dict[str, int | None]:
        minutes = self.cleaned_data.get("probe_every_minutes")
        hours = self.cleaned_data.get("audit_every_hours")
        return {
            "probe": minutes * 60 if minutes else None,
            "audit": hours * 3600 if hours else None,
        }


@admin.register(models.Pair)
class PairAdmin(AuditedAdmin):
    form = PairForm
    list_display = ("name", "fast", "base", "suite", "claim_text", "active")

    @admin.display(description="claim")
    def claim_text(self, obj):
        """The claim as the vendor words it (``evals.claims.Claim.text``)."""
        claim = obj.claim
        return claim.text() if claim else "—"

    def save_related(self, request, form, formsets, change):
        """After the pair: its schedules, and for a new pair its "outputs differ" rule."""
        super().save_related(request, form, formsets, change)
        pair = form.instance
        for row, before in pair_defaults.set_schedules(pair, form.every_s()):
            after = audit.snapshot(row)
            audit.record(obj=row, before=before, after=after, source="admin", user=request.user)
        if not change:
            pair_defaults.ensure_outputs_differ_rule(pair)


@admin.register(models.Run)
class RunAdmin(admin.ModelAdmin):
    list_display = ("id", "pair", "kind", "trigger", "status", "completed", "planned", "created_at")
    list_filter = ("status", "kind", "pair")
    readonly_fields = ("summary",)
    # a select of every pair/suite is small; raw ids keep the page from listing big tables
    raw_id_fields = ("pair", "suite")
    list_select_related = ("pair",)


@admin.register(models.Sample)
class SampleAdmin(admin.ModelAdmin):
    list_display = ("id", "run", "tier", "case", "ok", "error_class", "ttft_ms", "e2e_ms")
    list_filter = ("tier", "ok", "error_class")
    # the change page rendered a <select> of every run and every case (4–6 s on a real
    # database); raw ids render none, and the list joins its run and case in one query
    raw_id_fields = ("run", "case", "endpoint")
    list_select_related = ("run", "case", "run__pair", "case__suite")


@admin.register(models.Channel)
class ChannelAdmin(AuditedAdmin):
    list_display = ("name", "kind", "target", "disabled", "last_error")
    actions = ["send_test_notification"]

    @admin.action(description="Send a test notification")
    def send_test_notification(self, request, queryset):
        for channel in queryset.order_by("pk"):
            attempt = send_test(channel_id=channel.pk, user=request.user.get_username())
            if attempt.ok:
                self.message_user(request, f"{channel.name}: test sent", messages.SUCCESS)
            else:
                self.message_user(
                    request, f"{channel.name}: test failed: {attempt.error}", messages.ERROR
                )


@admin.register(models.AlertRule)
class AlertRuleAdmin(AuditedAdmin):
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
        "renotify_hours",
        "escalate_after_minutes",
    )
    filter_horizontal = ("channels", "escalation_channels")


@admin.register(models.Alert)
class AlertAdmin(admin.ModelAdmin):
    list_display = (
        "id",
        "rule",
        "pair",
        "state",
        "opened_at",
        "resolved_at",
        "silenced_until",
        "flapping",
        "message",
    )
    list_filter = ("state", "flapping")


@admin.register(models.MaintenanceWindow)
class MaintenanceWindowAdmin(AuditedAdmin):
    list_display = (
        "__str__",
        "pair",
        "vendor_host",
        "starts_at",
        "ends_at",
        "cron",
        "duration_minutes",
        "created_by",
    )
    exclude = ("created_by",)

    def save_model(self, request, obj, form, change):
        if not change:
            obj.created_by = request.user
        super().save_model(request, obj, form, change)


@admin.register(models.ConfigChange)
class ConfigChangeAdmin(admin.ModelAdmin):
    """Read-only: the audit log is evidence."""

    list_display = ("at", "username", "source", "action", "model", "object_repr")
    list_filter = ("action", "model", "source")

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


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
