"""The verdict page and diff viewer URLs, namespaced ``verdict:`` (included by ``monitor.urls``)."""

from django.urls import path

from monitor import verdict_views

app_name = "verdict"

urlpatterns = [
    path("pairs/<slug:name>/verdict/", verdict_views.verdict_page, name="page"),
    path("pairs/<slug:name>/verdict/audit/", verdict_views.run_audit, name="run_audit"),
    path("runs/<int:run_id>/diff/<slug:case_key>/", verdict_views.diff_view, name="diff"),
]
