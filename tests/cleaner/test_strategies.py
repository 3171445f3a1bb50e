"""compaction.strategy beyond Kafka (KIP-280): highest timestamp or highest header version wins,
ties go to the later offset; offsets and order are kept as with Kafka's rule."""

from __future__ import annotations

import struct

import numpy as np
import pytest

import compactlog
from compactlog.clock import MockTime
from compactlog.records import _py, kernels

CFG = {"cleanup.policy": "compact", "segment.bytes": "100000", "min.cleanable.dirty.ratio": "0.01"}


def survivors(cl):
    return {r.key: (r.offset, r.value) for r in cl.consume("t", 0, from_beginning=True)}


def test_timestamp_strategy_keeps_the_newest_timestamp_not_the_newest_offset(tmp_path):
    with compactlog.open(tmp_path, time=MockTime()) as cl:
        cl.create_topic("t", 1, {**CFG, "compaction.strategy": "timestamp"})
        cl.produce("t", b"late-arriving-but-newer", key=b"a", timestamp=5000)  # offset 0
        cl.produce("t", b"older", key=b"a", timestamp=1000)  # offset 1
        cl.produce("t", b"b1", key=b"b", timestamp=1000)
        cl.produce("t", b"b2-same-ts", key=b"b", timestamp=1000)  # tie: later offset wins
        cl.log("t").roll()
        cl.produce("t", b"x", key=b"filler", timestamp=1)
        cl.clean("t")
        s = survivors(cl)
        assert s[b"a"] == (0, b"late-arriving-but-newer")
        assert s[b"b"] == (3, b"b2-same-ts")


@pytest.mark.parametrize("encode", [lambda v: struct.pack(">q", v), lambda v: str(v).encode()], ids=["long", "digits"])
def test_header_strategy_keeps_the_highest_version(tmp_path, encode):
    with compactlog.open(tmp_path, time=MockTime()) as cl:
        cl.create_topic("t", 1, {**CFG, "compaction.strategy": "header:version"})
        cl.produce("t", b"v7", key=b"a", headers=[("version", encode(7))])
        cl.produce("t", b"v3", key=b"a", headers=[("version", encode(3))])
        cl.produce("t", b"no-version", key=b"a")
        cl.produce("t", b"c-none", key=b"c")
        cl.produce("t", b"c-none-later", key=b"c")
        cl.log("t").roll()
        cl.produce("t", b"x", key=b"filler")
        cl.clean("t")
        s = survivors(cl)
        assert s[b"a"] == (0, b"v7")
        assert s[b"c"] == (4, b"c-none-later")


def test_a_record_kept_by_an_earlier_round_outranks_newer_offsets_with_lower_versions(tmp_path):
    with compactlog.open(tmp_path, time=MockTime()) as cl:
        cl.create_topic("t", 1, {**CFG, "compaction.strategy": "header:version"})
        cl.produce("t", b"v9", key=b"a", headers=[("version", b"9")])
        cl.produce("t", b"v1", key=b"a", headers=[("version", b"1")])
        cl.log("t").roll()
        cl.produce("t", b"x", key=b"filler")
        cl.clean("t")
        assert survivors(cl)[b"a"] == (0, b"v9")
        cl.produce("t", b"v5", key=b"a", headers=[("version", b"5")])  # dirty, newer offset, lower version
        cl.log("t").roll()
        cl.produce("t", b"y", key=b"filler2")
        cl.clean("t")
        assert survivors(cl)[b"a"] == (0, b"v9")
        cl.produce("t", b"v10", key=b"a", headers=[("version", b"10")])
        cl.log("t").roll()
        cl.produce("t", b"z", key=b"filler3")
        cl.clean("t")
        s = survivors(cl)
        assert s[b"a"][1] == b"v10"
        assert [r.key for r in cl.consume("t", 0, from_beginning=True)].count(b"a") == 1


def test_versioned_kernels_agree_with_the_twin():
    keys = [b"k%d" % (i % 7) for i in range(60)]
    headers = [[("version", str(i * 37 % 11).encode())] if i % 5 else [] for i in range(60)]
    data = _py.encode_records(keys, [b"v"] * 60, list(range(60)), 0, None,
                              [[(k.encode(), v) for k, v in h] for h in headers])
    cols = np.empty((60, _py.NCOLS), np.int64)
    _py.scan_records(data, 60, cols)
    results = []
    impls = [_py] + ([kernels] if kernels.NATIVE else [])
    for impl in impls:
        hv = np.empty(60, np.int64)
        impl.header_versions(data, cols, b"version", hv)
        table, versions = np.zeros(50 * 24, np.uint8), np.zeros(50, np.int64)
        impl.offset_map_put(table, 50, 40, 0, data, cols, 100, 0, 0, versions, hv)
        out, vout = np.empty(60, np.int64), np.empty(60, np.int64)
        impl.offset_map_get(table, 50, data, cols, out, versions, vout)
        impl.offset_map_set(table, 50, versions, data, cols, np.array([0]), np.array([5]), np.array([99]))
        out2 = np.empty(60, np.int64)
        impl.offset_map_get(table, 50, data, cols, out2)
        results.append((hv.tolist(), out.tolist(), vout.tolist(), out2.tolist(), table.tobytes(), versions.tolist()))
    assert all(r == results[0] for r in results)
    hv = results[0][0]
    assert hv[0] == -1 and hv[1] == 37 % 11
