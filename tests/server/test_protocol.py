"""The sans-IO protocol connection, without sockets: requests as Kafka's schemas lay them out (kio's
writers), fed whole, a byte at a time, several at once and cut anywhere; everything that is not a
request we serve raises ProtocolError; response headers as each client expects them.
"""

from __future__ import annotations

import itertools
import struct

import pytest
import wire
from hypothesis import given, settings
from hypothesis import strategies as st
from kio.schema.errors import ErrorCode
from kio.serial import entity_reader

from compactlog.server.protocol import (
    NEED_DATA,
    Connection,
    ProtocolError,
    Request,
    UnsupportedApiVersions,
    encode_unsupported_api_versions,
)
from compactlog.server.versions import SERVED, response_class

REQUESTS = {
    "api_versions_v0": wire.api_versions(0),
    "api_versions_v3": wire.api_versions(3),
    "metadata_v0": wire.metadata(None, 0),
    "metadata_v8": wire.metadata(["prices", "orders"], 8, auto_create=True),
    "produce_v3": wire.produce("prices", 0, b"\x00" * 70, version=3),
    "produce_v8": wire.produce("prices", 2, None, version=8, acks=1),
    "fetch_v4": wire.fetch("prices", 0, 17, version=4),
    "fetch_v11": wire.fetch("prices", 1, 3, version=11, max_wait=500),
    "list_offsets_v1": wire.list_offsets("prices", 0, -2, version=1),
    "list_offsets_v5": wire.list_offsets("prices", 0, 1_700_000_000_000, version=5),
    "init_producer_id_v1": wire.init_producer_id(1),
    "describe_cluster_v0": wire.describe_cluster(),  # flexible: request header v2
}


def drain(conn: Connection) -> list:
    """Every request the connection can hand out now."""
    out = []
    while (r := conn.next_request()) is not NEED_DATA:
        out.append(r)
    return out


def check(req, body, correlation_id: int) -> None:
    cls = type(body)
    assert isinstance(req, Request)
    assert (req.api_key, req.api_version, req.correlation_id) == (cls.__api_key__, cls.__version__, correlation_id)
    assert req.client_id == "compactlog-tests"
    assert req.body == body


@pytest.mark.parametrize("name", REQUESTS)
def test_a_whole_request(name):
    body = REQUESTS[name]
    conn = Connection()
    assert conn.next_request() is NEED_DATA
    data = wire.request_frame(body, correlation_id=41)
    conn.receive_data(data)
    req = conn.next_request()
    check(req, body, 41)
    assert req.size == len(data) - 4
    assert conn.next_request() is NEED_DATA
    assert conn.buffered == 0


@pytest.mark.parametrize("name", REQUESTS)
def test_one_byte_at_a_time(name):
    body = REQUESTS[name]
    data = wire.request_frame(body, correlation_id=7)
    conn = Connection()
    for i in range(len(data) - 1):
        conn.receive_data(data[i:i + 1])
        assert conn.next_request() is NEED_DATA, f"a request after {i + 1} of {len(data)} bytes"
    conn.receive_data(data[-1:])
    check(conn.next_request(), body, 7)
    assert conn.next_request() is NEED_DATA


def test_several_requests_in_one_chunk_come_out_in_order():
    bodies = list(REQUESTS.values())
    data = b"".join(wire.request_frame(b, correlation_id=i) for i, b in enumerate(bodies))
    conn = Connection()
    conn.receive_data(data)
    got = drain(conn)
    assert len(got) == len(bodies)
    for i, (req, body) in enumerate(zip(got, bodies)):
        check(req, body, i)


def test_a_chunk_ending_inside_the_next_request():
    a, b = wire.request_frame(REQUESTS["fetch_v11"], 1), wire.request_frame(REQUESTS["produce_v8"], 2)
    conn = Connection()
    conn.receive_data(a + b[:9])
    assert [r.correlation_id for r in drain(conn)] == [1]
    conn.receive_data(b[9:])
    assert [r.correlation_id for r in drain(conn)] == [2]


@settings(max_examples=60, deadline=None)
@given(cuts=st.lists(st.integers(min_value=0, max_value=2000), max_size=12))
def test_any_split_of_a_stream_gives_the_same_requests(cuts):
    bodies = list(REQUESTS.values())
    data = b"".join(wire.request_frame(b, correlation_id=i) for i, b in enumerate(bodies))
    points = sorted({min(c, len(data)) for c in cuts} | {0, len(data)})
    conn = Connection()
    got = []
    for lo, hi in itertools.pairwise(points):
        conn.receive_data(data[lo:hi])
        got += drain(conn)
    assert [r.correlation_id for r in got] == list(range(len(bodies)))
    assert [r.body for r in got] == bodies


def test_the_buffer_does_not_grow_with_a_request_always_in_flight():
    """A pipelining client whose reads always end inside the next request must not make the
    connection keep every request it ever sent."""
    one = wire.request_frame(REQUESTS["fetch_v11"], 1)
    stream = one * 400
    conn = Connection()
    step = len(one) + 5  # never a request boundary at a chunk's end
    count = 0
    for i in range(0, len(stream), step):
        conn.receive_data(stream[i:i + step])
        count += len(drain(conn))
        assert len(conn._buf) < 2 * step
    assert count == 400


def test_header_tagged_fields_are_skipped():
    """A flexible request header may carry tagged fields; we know none of them and skip them all."""
    body = wire.describe_cluster()
    head = wire.header_bytes(body, 5, "x")
    assert head.endswith(b"\x00")
    tagged = head[:-1] + bytes([2, 0, 3]) + b"abc" + bytes([9, 1]) + b"z"
    conn = Connection()
    conn.receive_data(wire.frame(tagged + wire.body_bytes(body)))
    req = conn.next_request()
    assert (req.api_key, req.correlation_id, req.client_id, req.body) == (60, 5, "x", body)


def test_a_null_client_id_and_a_client_id_that_is_not_utf8():
    body = wire.api_versions(0)
    for raw, expect in [(b"\xff\xff", None), (b"\x00\x03a\xffb", "a\ufffdb")]:
        conn = Connection()
        conn.receive_data(wire.frame(struct.pack(">hhi", 18, 0, 3) + raw + wire.body_bytes(body)))
        assert conn.next_request().client_id == expect


# refusals ------------------------------------------------------------------------------------------

def refused(conn: Connection, data: bytes, match: str) -> None:
    conn.receive_data(data)
    with pytest.raises(ProtocolError, match=match):
        conn.next_request()
    assert conn.broken
    with pytest.raises(ProtocolError):  # the connection stays failed
        conn.next_request()


def header(key: int, version: int, correlation: int = 1) -> bytes:
    return struct.pack(">hhih", key, version, correlation, -1)


def test_a_frame_above_socket_request_max_bytes_fails_on_its_size_alone():
    conn = Connection(max_request_bytes=1000)
    refused(conn, struct.pack(">i", 1001), "outside")  # the body is never waited for


def test_a_frame_at_the_limit_is_read():
    body = wire.metadata(["t" * 100])
    data = wire.request_frame(body)
    conn = Connection(max_request_bytes=len(data) - 4)
    conn.receive_data(data)
    assert conn.next_request().body == body


def test_a_negative_size():
    refused(Connection(), struct.pack(">i", -5) + b"\0" * 20, "outside")


@pytest.mark.parametrize("size", [0, 3, 9])
def test_a_frame_shorter_than_a_header(size):
    refused(Connection(), wire.frame(b"\x00" * size), "shorter than a request header")


def test_a_client_id_running_past_the_frame():
    refused(Connection(), wire.frame(struct.pack(">hhih", 18, 0, 1, 30) + b"abc"), "client id")


@pytest.mark.parametrize("key", [57, 68, 71, 999, -1, 32767])
def test_an_unknown_api_key(key):
    refused(Connection(), wire.frame(header(key, 0)), "unknown API key")


def test_an_api_the_broker_has_no_handler_for_is_unknown_to_its_connections():
    apis = {k: r for k, r in SERVED.items() if k in (18, 3)}
    refused(Connection(apis=apis), wire.request_frame(REQUESTS["fetch_v11"]), "unknown API key 1")


@pytest.mark.parametrize("key,version", [(0, 2), (0, 11), (1, 3), (1, 17), (3, 13), (2, 0), (60, 2), (3, -1)])
def test_a_version_we_do_not_serve(key, version):
    refused(Connection(), wire.frame(header(key, version) + b"\x00" * 40), "not served")


@pytest.mark.parametrize("name", ["metadata_v8", "produce_v3", "fetch_v11", "api_versions_v3", "describe_cluster_v0"])
def test_a_truncated_body(name):
    body = REQUESTS[name]
    payload = wire.header_bytes(body, 1, "c") + wire.body_bytes(body)
    refused(Connection(), wire.frame(payload[:-1]), "cannot parse")


@pytest.mark.parametrize("name", ["api_versions_v0", "metadata_v8", "produce_v8", "fetch_v4"])
def test_trailing_bytes_after_a_body_are_ignored_as_kafka_ignores_them(name):
    """librdkafka sends an extra empty tagged-field section after some flexible bodies; Kafka reads the
    body and ignores the rest of the frame. The next request still starts at the next frame."""
    body = REQUESTS[name]
    payload = wire.header_bytes(body, 1, "c") + wire.body_bytes(body)
    conn = Connection()
    conn.receive_data(wire.frame(payload + b"\x00\x07") + wire.request_frame(REQUESTS["metadata_v8"], 2))
    first, second = conn.next_request(), conn.next_request()
    assert (first.body, first.correlation_id) == (body, 1) and second.correlation_id == 2
    assert conn.next_request() is NEED_DATA and not conn.broken


def test_requests_before_a_bad_one_are_still_handed_out():
    good = wire.request_frame(REQUESTS["metadata_v8"], 1)
    conn = Connection()
    conn.receive_data(good + wire.frame(header(999, 0)) + good)
    assert conn.next_request().correlation_id == 1
    with pytest.raises(ProtocolError):
        conn.next_request()
    conn.receive_data(good)  # ignored: nothing after the failure is read
    with pytest.raises(ProtocolError):
        conn.next_request()


# ApiVersions at a version we do not know --------------------------------------------------------------

@pytest.mark.parametrize("version", [5, 9, 32767, -1])
def test_api_versions_too_new_is_answered_with_error_35_in_the_v0_layout(version):
    # a future version: header v2 (tags), a body we cannot know and must not parse; a negative version
    # is answered the same way (Kafka: any version it does not support)
    payload = struct.pack(">hhih", 18, version, 77, 4) + b"rdkf" + b"\x00" + b"\x05whatever\x00"
    conn = Connection()
    conn.receive_data(wire.frame(payload))
    req = conn.next_request()
    assert req == UnsupportedApiVersions(correlation_id=77, api_version=version)
    assert not conn.broken
    conn.receive_data(wire.request_frame(wire.api_versions(3), 78))
    assert conn.next_request().correlation_id == 78  # the client retries on the same connection

    data = encode_unsupported_api_versions(req)
    (size,) = struct.unpack_from(">i", data)
    assert size == len(data) - 4
    correlation, resp = wire.decode_response(wire.api_versions(0), data[4:])
    assert correlation == 77
    assert resp.error_code == ErrorCode.unsupported_version
    assert [(k.api_key, k.min_version, k.max_version) for k in resp.api_keys] == [(18, 0, SERVED[18].max_version)]


# response headers ----------------------------------------------------------------------------------------

def encoded(name: str, **values):
    body = REQUESTS[name]
    conn = Connection()
    conn.receive_data(wire.request_frame(body, correlation_id=99))
    req = conn.next_request()
    return body, req, conn.encode(req, response_class(req.api_key, req.api_version)(**values))


def test_non_flexible_versions_answer_with_response_header_v0():
    mod = wire.module_of("metadata", 8, "response")
    body, _req, data = encoded("metadata_v8", throttle_time=wire.ms(0), brokers=(
        mod.MetadataResponseBroker(node_id=1, host="h", port=9, rack=None),), cluster_id="c", controller_id=1,
        topics=(), cluster_authorized_operations=-(2**31))
    assert struct.unpack_from(">ii", data) == (len(data) - 4, 99)
    resp, used = entity_reader(wire.response_class_for(body))(memoryview(data), 8)  # the body right after the id
    assert 8 + used == len(data)
    assert resp.brokers[0].host == "h"


def test_flexible_versions_answer_with_response_header_v1():
    mod = wire.module_of("describe_cluster", 0, "response")
    body, _req, data = encoded("describe_cluster_v0", throttle_time=wire.ms(0), error_code=ErrorCode.none,
                              error_message=None, cluster_id="c", controller_id=1, brokers=(
                                  mod.DescribeClusterBroker(broker_id=1, host="h", port=9, rack=None),),
                              cluster_authorized_operations=-(2**31))
    assert struct.unpack_from(">ii", data) == (len(data) - 4, 99)
    assert data[8] == 0  # the header's empty tagged-field section
    resp, used = entity_reader(wire.response_class_for(body))(memoryview(data), 9)
    assert 9 + used == len(data)
    assert resp.cluster_id == "c"


def test_api_versions_v3_answers_with_header_v0_although_its_body_is_flexible():
    mod = wire.module_of("api_versions", 3, "response")
    body, _req, data = encoded("api_versions_v3", error_code=ErrorCode.none, throttle_time=wire.ms(0), api_keys=(
        mod.ApiVersion(api_key=18, min_version=0, max_version=4),))
    assert struct.unpack_from(">ii", data) == (len(data) - 4, 99)
    resp, used = entity_reader(wire.response_class_for(body))(memoryview(data), 8)  # no tag byte after the id
    assert 8 + used == len(data)
    assert resp.api_keys[0].max_version == 4
