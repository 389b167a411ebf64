"""The client against hostile replies of the simulated vendor: empty streams fail, oversized
bodies keep a bounded prefix, and no server string keeps the API key in any of its forms."""

from __future__ import annotations

import base64
import dataclasses
import json
import urllib.parse
from dataclasses import asdict

from evals.client import key_scrubber
from evals.records import TEXT_KEPT_CHARS, storable
from tests.evals.calls import endpoint, run
from tests.support import CANARY, canary_forms


def leaks(record_or_text: object, key: str = CANARY) -> list[str]:
    text = (
        record_or_text
        if isinstance(record_or_text, str)
        else json.dumps(asdict(record_or_text), ensure_ascii=False)
    )  # type: ignore[call-overload]
    return [f for f in canary_forms(key) if f.lower() in text.lower()]


def test_an_empty_200_stream_is_a_failed_sample_of_its_own_class(vendor):
    rec = run(endpoint(vendor, "demo-empty"))
    assert rec.http_status == 200
    assert (rec.ok, rec.error_class) == (False, "empty_stream")
    assert rec.text == "" and rec.ttft_ms is None


def test_an_oversized_body_keeps_a_bounded_prefix_and_says_so(vendor):
    rec = run(endpoint(vendor, "demo-huge", max_body_bytes=1_000_000))
    assert (rec.ok, rec.error_class) == (False, "body_too_large")
    assert len(rec.text) == TEXT_KEPT_CHARS and set(rec.text) == {"x"}
    assert "kept the first 65536 chars of text" in rec.error_message


def test_a_reply_with_nul_and_a_lone_surrogate_is_kept_then_made_storable(vendor):
    rec = run(endpoint(vendor, "demo-nul"))
    assert rec.ok and "\x00" in rec.text and "\ud800" in rec.text
    stored = storable(asdict(rec))
    assert "\x00" not in stored["text"] and "\ud800" not in stored["text"]
    assert stored["text"].startswith("NUL\ufffd and lone surrogate \ufffd: ")
    json.dumps(stored, ensure_ascii=False).encode("utf-8")  # encodable: no surrogate left


def test_a_key_echoed_in_headers_model_fingerprint_and_text_is_scrubbed(vendor):
    rec = run(dataclasses.replace(endpoint(vendor, "demo-echokey"), api_key=CANARY))
    assert rec.ok
    assert rec.headers["x-request-id"] == "Bearer ***" and rec.model_id == "Bearer ***"
    assert rec.headers["server"] == "echo/Bearer ***"
    assert rec.system_fingerprint == "bearer ***"
    assert rec.text.startswith("Bearer *** bearer *** Bearer%20*** ***")
    assert leaks(rec) == []


def test_the_scrubber_covers_the_normalised_forms():
    scrub = key_scrubber(f"  {CANARY}\n")
    basic = base64.b64encode(f"user:{CANARY}".encode()).decode()
    text = (
        f"{CANARY} {CANARY.upper()} {urllib.parse.quote_plus(CANARY + '/')} Basic {basic} "
        f"{base64.b64encode(CANARY.encode()).decode()} masked {CANARY[:8]}...{CANARY[-6:]}"
    )
    scrubbed = scrub(text)
    assert leaks(scrubbed) == [] and basic.rstrip("=") not in scrubbed
    assert key_scrubber(None)("unchanged") == "unchanged"


def test_storable_replaces_what_postgresql_refuses_and_keeps_the_rest():
    value = {"a\x00": ["x\ud800y", float("nan"), "\ud83d\ude00", 1.5, ("t", None)], "ok": "é"}
    assert storable(value) == {
        "a\ufffd": ["x\ufffdy", None, "\U0001f600", 1.5, ["t", None]],
        "ok": "é",
    }
    assert storable("plain") == "plain" and storable(3) == 3
