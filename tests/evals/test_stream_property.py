"""``stream_chat`` never raises, whatever the bytes: random bodies and real recorded streams
(tests/data/streams) mutated in their bytes, their framing and their JSON values' types, each
served by a real server on 127.0.0.1 to the product's own client. Every answer is a record:
ok, or failed with one of ``records.ERROR_CLASSES``."""

from __future__ import annotations

import asyncio
import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from evals.client import make_client, stream_chat
from evals.records import ERROR_CLASSES, TimingRecord
from tests.evals.calls import ASK, endpoint
from tests.evals.replay import INDEX, Replay, recorded, streams

CORPUS = streams("openai", "anthropic", "responses")
SETTINGS = settings(
    max_examples=60,
    deadline=None,
    database=None,
    derandomize=True,  # the same examples in CI as here; the corpus gives the variety
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(10**40), max_value=10**40)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=8,
)


@pytest.fixture(scope="module")
def replay():
    with Replay() as r:
        yield r


def _check(replay: Replay, body: bytes, protocol: str, backend: str = "aiohttp", **kw) -> None:
    url = replay.add(body, **kw)

    async def go() -> TimingRecord:
        async with make_client(backend=backend) as client:
            ep = endpoint(url, "m", protocol, timeout_s=10.0)
            return await stream_chat(client, ep, ASK)

    rec = asyncio.run(go())  # raises here if stream_chat ever does
    assert isinstance(rec, TimingRecord)
    assert rec.ok or rec.error_class in ERROR_CLASSES, (rec.error_class, rec.error_message)
    assert isinstance(rec.text, str) and isinstance(rec.reasoning_text, str)
    for count in (rec.completion_tokens, rec.prompt_tokens, rec.cached_tokens):
        assert count is None or type(count) is int


def _protocol(name: str) -> str:
    return INDEX[name]["protocol"]


def _keys(value, out):
    if isinstance(value, dict):
        for k, v in value.items():
            out.add(k)
            _keys(v, out)
    elif isinstance(value, list):
        for v in value:
            _keys(v, out)
    return out


def _replace(value, key, new):
    if isinstance(value, dict):
        return {k: new if k == key else _replace(v, key, new) for k, v in value.items()}
    if isinstance(value, list):
        return [_replace(v, key, new) for v in value]
    return value


@SETTINGS
@given(name=st.sampled_from(CORPUS), which=st.integers(min_value=0), value=JSON)
def test_a_recorded_stream_with_a_field_of_another_type(replay, name, which, value):
    """One key of the stream's JSON (``content``, ``completion_tokens``, ``index``...) given
    another value, of any type, in every event that has it."""
    events = recorded(name).replace(b"\r\n", b"\n").split(b"\n\n")
    objs = {}
    for i, event in enumerate(events):
        head, _, rest = event.partition(b"data: ")
        data, sep, tail = rest.partition(b"\n")  # lines after the data line (event: ...)
        if data.startswith(b"{"):
            objs[i] = (head, json.loads(data), sep + tail)
    keys = sorted(set().union(*(_keys(obj, set()) for _, obj, _ in objs.values())))
    key = keys[which % len(keys)]
    for i, (head, obj, tail) in objs.items():
        events[i] = head + b"data: " + json.dumps(_replace(obj, key, value)).encode() + tail
    _check(replay, b"\n\n".join(events), _protocol(name))


@SETTINGS
@given(
    name=st.sampled_from(CORPUS),
    cuts=st.lists(st.tuples(st.integers(min_value=0), st.binary(max_size=8)), max_size=6),
    cut_at=st.one_of(st.none(), st.integers(min_value=0)),
    backend=st.sampled_from(["aiohttp", "httpcore"]),
    encoding=st.sampled_from(["", "", "gzip"]),
    chunk=st.integers(min_value=1, max_value=2048),
)
def test_a_recorded_stream_with_bytes_flipped_inserted_or_cut(
    replay, name, cuts, cut_at, backend, encoding, chunk
):
    body = bytearray(recorded(name))
    for at, junk in cuts:
        at %= len(body)
        body[at : at + len(junk)] = junk  # overwrite (and so, at the end, extend)
    if cut_at is not None:
        del body[cut_at % len(body) :]
    _check(replay, bytes(body), _protocol(name), backend, encoding=encoding, chunk=chunk)


@SETTINGS
@given(
    body=st.one_of(
        st.binary(max_size=2000),
        st.lists(
            st.one_of(
                st.just(b"data: [DONE]"),
                st.just(b'event: message_stop\ndata: {"type":"message_stop"}'),
                st.just(b"event: error"),
                JSON.map(lambda v: b"data: " + json.dumps(v).encode()),
                st.binary(max_size=40).map(lambda b: b"data: " + b),
            ),
            max_size=12,
        ).map(lambda events: b"\n\n".join(events) + b"\n\n"),
    ),
    protocol=st.sampled_from(["openai", "anthropic", "responses"]),
)
def test_random_bodies_are_records(replay, body, protocol):
    _check(replay, body, protocol)
