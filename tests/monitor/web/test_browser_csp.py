"""The Content-Security-Policy in headless chromium: every page carries the header, and the
overview, pair, speed, verdict, timeline and audit pages draw (plotly charts, htmx) with no
violation reported, while an inline script (what an injected one would be) is refused.
Screenshot: ``var/screenshots/csp-pair.png``."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model

from monitor.models import ConfigChange
from tests.monitor.web.browser import CHROMIUM, launch, screenshots_dir
from tests.monitor.web.test_browser_verdict_speed import _pair

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(
        not CHROMIUM.exists(), reason="needs Debian's chromium at /usr/bin/chromium"
    ),
]

# Every violation the page sees, whether or not the console shows it
LISTEN = """
window.__csp = [];
document.addEventListener('securitypolicyviolation',
  e => window.__csp.push(e.violatedDirective + ' ' + (e.blockedURI || 'inline')));
"""


@pytest.mark.django_db(transaction=True)
def test_the_pages_draw_under_the_policy_with_no_violation(
    live_server, demo_vendor_url, monkeypatch
):
    sync_api = pytest.importorskip("playwright.sync_api")
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    get_user_model().objects.create_superuser("root", password="pw-root-123")
    pair = _pair(demo_vendor_url)
    console: list[str] = []
    with sync_api.sync_playwright() as p:
        browser = launch(p)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 1000})
            page.add_init_script(LISTEN)
            page.on("console", lambda m: console.append(m.text))
            login = page.goto(f"{live_server.url}/accounts/login/")
            assert "script-src 'self'" in login.headers["content-security-policy"]
            page.fill("#id_username", "root")
            page.fill("#id_password", "pw-root-123")
            page.click("button[type=submit]")
            page.wait_for_selector("#pairs-table table.overview")
            seen = {"overview": page.evaluate("window.__csp")}
            charts = {"pair": "", "speed": "speed/", "verdict": "verdict/"}
            for name, tail in charts.items():
                page.goto(f"{live_server.url}/pairs/{pair.name}/{tail}")
                page.wait_for_selector(".js-plotly-plot .main-svg", timeout=20_000)
                if name == "pair":
                    page.screenshot(path=str(screenshots_dir() / "csp-pair.png"), full_page=True)
                seen[name] = page.evaluate("window.__csp")
            for name, path in {
                "timeline": f"pairs/{pair.name}/timeline/",
                "audit": "audit/",
            }.items():
                page.goto(f"{live_server.url}/{path}")
                page.wait_for_load_state("networkidle")
                seen[name] = page.evaluate("window.__csp")
            assert all(not v for v in seen.values()), seen

            # the two handlers that were inline attributes still work from page.js: the
            # re-baseline button asks first (dismissed: nothing posted), the audit log's
            # kind filter submits when changed
            page.goto(f"{live_server.url}/pairs/{pair.name}/verdict/")
            asked: list[str] = []
            page.once("dialog", lambda d: (asked.append(d.message), d.dismiss()))
            page.click("#acknowledge")
            assert asked and asked[0].startswith("Accept the change")
            assert not ConfigChange.objects.filter(action="reset").exists()
            page.once("dialog", lambda d: d.accept())
            with page.expect_navigation():
                page.click("#acknowledge")
            assert ConfigChange.objects.filter(action="reset").count() == 1
            page.goto(f"{live_server.url}/audit/")
            with page.expect_navigation():
                page.select_option("select[name=model]", "pair")
            assert "model=pair" in page.url
            assert not page.evaluate("window.__csp")
            assert not [m for m in console if "Content Security Policy" in m], console

            # the policy does bite: an inline script in the page is refused and reported
            page.evaluate(
                "() => { const s = document.createElement('script');"
                " s.textContent = 'window.__ran = 1'; document.body.appendChild(s); }"
            )
            page.wait_for_function("window.__csp.length > 0")
            assert page.evaluate("window.__ran") is None
            assert page.evaluate("window.__csp")[0].startswith("script-src")
        finally:
            browser.close()
