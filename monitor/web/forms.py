"""Forms the pages share: the maintenance-window form is drawn by the pair page and posted to
``monitor.web.maintenance``, so it lives apart from both (neither imports the other for it)."""

from __future__ import annotations

from django import forms

from monitor.models import MaintenanceWindow


class WindowForm(forms.ModelForm):
    class Meta:
        model = MaintenanceWindow
        fields = ["starts_at", "ends_at", "reason"]
        widgets = {
            "starts_at": forms.DateTimeInput(attrs={"type": "datetime-local"}),
            "ends_at": forms.DateTimeInput(attrs={"type": "datetime-local"}),
        }
        labels = {"starts_at": "Start (UTC)", "ends_at": "End (UTC)"}
