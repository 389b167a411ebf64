"""The browser pages: one module per page (``overview``, ``pair``, ``run``, ``metrics``,
``speed``, ``verdict``), their chart modules (``pair_charts``, ``speed_charts``,
``verdict_charts``) on one chart kit (``chart_kit``), formatted table cells (``cells``), the
htmx rule (``htmx``), page access (``access``: sign-in, then the page's permission), the CSV/JSON
downloads (``exports``), the token-protected Prometheus scrape (``scrape``) and one URL module
(``urls``).

Function views; one template serves a page and its htmx fragment (``{% partialdef %}``); views
read through ``monitor.selectors`` and the runs' typed summaries and never recompute a figure.
"""
