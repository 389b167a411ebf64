"""Every page's URL, in five namespaces: ``monitor:`` (overview, pair, timeline, alert actions,
maintenance form, audit log, run, sample, metrics, the CSV/JSON exports), ``speed:``,
``verdict:``, ``worse:`` (capability) and ``reports:`` (the report archive); included at the
site root by
``monitor.urls``."""

from django.urls import include, path

from monitor.web import (
    audit,
    cost,
    episode,
    exports,
    maintenance,
    metrics,
    onboarding,
    overview,
    pair,
    reports,
    run,
    speed,
    timeline,
    verdict,
    worse,
)

pages = [
    path("", overview.overview, name="overview"),
    path("pairs/add/", onboarding.add_pair, name="add_pair"),  # before the pair: "add" is no pair
    path("pairs/<slug:name>/", pair.pair_detail, name="pair"),
    path("pairs/<slug:name>/probe/", pair.run_probe, name="run_probe"),
    path(
        "pairs/<slug:name>/test-connection/",
        onboarding.test_pair_connection,
        name="test_connection",
    ),
    path(
        "pairs/<slug:name>/border-discovery/",
        cost.allow_border_discovery,
        name="allow_border_discovery",
    ),
    path("pairs/<slug:name>/timeline/", timeline.timeline, name="timeline"),
    path("pairs/<slug:name>/maintenance/", maintenance.add_window, name="add_maintenance"),
    path("alerts/<int:alert_id>/<slug:action>/", timeline.alert_action, name="alert_action"),
    path("audit/", audit.audit_log, name="audit"),
    path("runs/<int:run_id>/", run.run_detail, name="run"),
    path("samples/<int:sample_id>/", run.sample_detail, name="sample"),
    # an agent task's key holds "/" (bfcl/multi_turn_base_0): a path, not a slug
    path("runs/<int:run_id>/episodes/<path:case_key>/", episode.episode_page, name="episode"),
    path("metrics/", metrics.metrics, name="metrics"),
    path("docs/benchmarks/", metrics.benchmarks_doc, name="benchmarks"),
    path("runs/<int:run_id>/samples.<slug:fmt>", exports.run_samples, name="export_samples"),
    path("pairs/<slug:name>/runs.<slug:fmt>", exports.pair_runs, name="export_runs"),
    path("pairs/<slug:name>/speed/speedups.<slug:fmt>", exports.speedups, name="export_speedups"),
]
speed_pages = [
    path("pairs/<slug:name>/speed/", speed.speed_page, name="page"),
]
verdict_pages = [
    path("pairs/<slug:name>/verdict/", verdict.verdict_page, name="page"),
    path("pairs/<slug:name>/verdict/audit/", verdict.run_audit, name="run_audit"),
    path("pairs/<slug:name>/verdict/acknowledge/", verdict.acknowledge, name="acknowledge"),
    # a path, not a slug: a HumanEval pair's temperature-0 cases are keyed "humaneval/10"
    path("runs/<int:run_id>/diff/<path:case_key>/", verdict.diff_view, name="diff"),
]

worse_pages = [
    path("pairs/<slug:name>/worse/", worse.worse_page, name="page"),
    # benchmark case keys hold "/" (humaneval/0, bfcl/simple_python_3): a path, not a slug
    path("runs/<int:run_id>/case-diff/<path:case_key>", verdict.diff_view, name="diff"),
]

report_pages = [
    path("reports/", reports.report_list, name="list"),
    path("reports/<int:report_id>/download/", reports.report_download, name="download"),
    path("reports/generate/", reports.report_generate, name="generate"),
]

urlpatterns = [
    path("", include((pages, "monitor"))),
    path("", include((verdict_pages, "verdict"))),
    path("", include((speed_pages, "speed"))),
    path("", include((worse_pages, "worse"))),
    path("", include((report_pages, "reports"))),
]
