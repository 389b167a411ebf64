"""The reports archive's URLs, namespaced ``reports:`` (included at the site root)."""

from django.urls import path

from monitor import report_views

app_name = "reports"

urlpatterns = [
    path("reports/", report_views.report_list, name="list"),
    path("reports/<int:report_id>/download/", report_views.report_download, name="download"),
]
