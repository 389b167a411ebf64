"""The pages' URLs, namespaced ``monitor:`` (included at the site root by ``monitor.urls``)."""

from django.urls import path

from monitor import views

app_name = "monitor"

urlpatterns = [
    path("", views.overview, name="overview"),
    path("pairs/<slug:name>/", views.pair_detail, name="pair"),
    path("pairs/<slug:name>/probe/", views.run_probe, name="run_probe"),
    path("runs/<int:run_id>/", views.run_detail, name="run"),
    path("samples/<int:sample_id>/", views.sample_detail, name="sample"),
    path("metrics/", views.metrics, name="metrics"),
    path("docs/benchmarks/", views.benchmarks_doc, name="benchmarks"),
]
