"""The key scrubber on each encoded form a vendor may echo, checked by a decoder written apart
from it (``tests.support.key_decoded_hits``)."""

import base64
import json

import pytest

from evals.records import TimingRecord
from evals.scrub import MASK, key_scrubber, scrub_logprobs, scrub_record
from tests.support import CANARY, key_decoded_hits

K = CANARY
FORMS = {
    "raw": K,
    "upper": K.upper(),
    "bearer b64 @0": base64.b64encode(f"Bearer {K}".encode()).decode(),
    "bearer b64 @1": base64.b64encode(f"xBearer {K}".encode()).decode(),
    "bearer b64 @2": base64.b64encode(f"xyBearer {K}".encode()).decode(),
    "json b64": base64.b64encode(json.dumps({"k": K, "n": 1}).encode()).decode(),
    "urlsafe b64": base64.urlsafe_b64encode(f"??{K}".encode()).decode(),
    "hex": K.encode().hex(),
    "HEX": K.encode().hex().upper(),
    "reversed": K[::-1],
    "zero-width": "\u200b".join(K),
    "word joiner": "\u2060".join(K),
    "U+2010": K.replace("-", "\u2010"),
    "U+2212": K.replace("-", "\u2212"),
    "full-width": "".join(chr(ord(c) + 0xFEE0) if c.isalnum() else c for c in K),
    "cut to 13": K[:13],
    "cut from the front": K[-13:],
    "masked": f"{K[:8]}...{K[-6:]}",
    "json escape": json.dumps(K).replace("Z", "\\u005a"),
}


@pytest.mark.parametrize("name", FORMS)
def test_each_encoded_form_is_cut_out(name):
    text = f"error: {FORMS[name]} (request 42)"
    assert key_decoded_hits(text), "the form holds the key (else the test proves nothing)"
    scrubbed = key_scrubber(K)(text)
    assert key_decoded_hits(scrubbed) == [], scrubbed
    assert scrubbed.startswith("error: ") or MASK in scrubbed


def test_a_key_split_across_logprob_tokens_is_masked_in_every_token_it_touches():
    tokens = ["The", " key", " is ", *(K[i : i + 3] for i in range(0, len(K), 3)), "."]
    entries = [{"token": t, "logprob": -0.5, "top_logprobs": [{"token": t}]} for t in tokens]
    out = scrub_logprobs(entries, K)
    joined = "".join(e["token"] for e in out)
    assert key_decoded_hits(joined) == [] and joined.startswith("The key is ***")
    assert out[-1]["token"] == "." and out[0]["token"] == "The"


def test_every_field_of_a_record_is_scrubbed_and_tool_arguments_stay_json():
    rec = TimingRecord(
        ok=True,
        served_tier=f"t-{K}",
        tool_calls=[{"name": f"f_{K}", "arguments_json": json.dumps({"q": K})}],
        headers={"x-request-id": K.encode().hex()},
        server_timings={"note": K[::-1]},
    )
    scrub_record(rec, K)
    assert key_decoded_hits(repr(rec)) == []
    assert json.loads(rec.tool_calls[0]["arguments_json"]) == {"q": MASK}


def test_text_without_the_key_is_unchanged():
    text = "sk- is a prefix; def f(x):\n    return x - 1  # ok, Ｆｕｌｌ width"
    assert key_scrubber(K)(text) == text
