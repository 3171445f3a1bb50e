"""``dump-log`` prints transactions' batches and control records as Kafka's DumpLogSegments does.

The expected lines follow ``printBatchLevel`` and ``dumpLog`` in Kafka 4.0's
``core/src/main/scala/kafka/tools/DumpLogSegments.scala``: the batch line's ``isTransactional`` and
``isControl``, and on a control record's line ``endTxnMarker: <type> coordinatorEpoch: <n>`` for a
marker or ``controlType: <name>(<id>)`` for any other type, with no key or payload even with
``--print-data-log``; and ``dumpTxnIndex``'s line per aborted transaction of a ``.txnindex``.

The segment is written here batch by batch, as a partition holding two transactions holds them, so
that every byte the tool reads is one this test chose (clients never write control batches; the
storage writes markers itself).
"""

from __future__ import annotations

import struct
from pathlib import Path

from click.testing import CliRunner

from compactlog.cli import main
from compactlog.records.batch import CRC_OFFSET, BatchInfo, build_batch
from compactlog.records.control import ABORT, COMMIT, build_end_txn_marker

PID, EPOCH, TS = 4000, 2, 1_700_000_000_000


def crc_of(batch: bytes) -> int:
    return struct.unpack_from(">I", batch, CRC_OFFSET)[0]


def txn_data(base_offset: int, sequence: int, pairs: list[tuple[bytes, bytes]]) -> bytes:
    info = BatchInfo(base_offset=base_offset, producer_id=PID, producer_epoch=EPOCH, base_sequence=sequence,
                     partition_leader_epoch=0, is_transactional=True)
    return build_batch([k for k, _ in pairs], [v for _, v in pairs], [TS] * len(pairs), info=info)


def marker(kind: int, base_offset: int, coordinator_epoch: int) -> bytes:
    return build_end_txn_marker(kind, coordinator_epoch, producer_id=PID, producer_epoch=EPOCH, timestamp=TS + 1,
                                base_offset=base_offset, partition_leader_epoch=0)


def segment(tmp_path: Path, *batches: bytes) -> Path:
    part = tmp_path / "t-0"
    part.mkdir()
    log = part / ("0" * 20 + ".log")
    log.write_bytes(b"".join(batches))
    return log


def dump(path: Path, *flags: str) -> list[str]:
    res = CliRunner().invoke(main, ["dump-log", "--files", str(path), *flags])
    assert res.exit_code == 0, res.output
    return res.stdout.splitlines()


def test_a_committed_and_an_aborted_transaction(tmp_path):
    batches = [
        txn_data(0, 0, [(b"a", b"1"), (b"b", b"2")]),
        marker(COMMIT, 2, 0),
        txn_data(3, 2, [(b"c", b"3")]),
        marker(ABORT, 4, 5),
    ]
    log = segment(tmp_path, *batches)
    positions = [sum(len(b) for b in batches[:i]) for i in range(len(batches))]

    def batch_line(i: int, base: int, last: int, count: int, seq: int, last_seq: int, ts: int) -> str:
        b = batches[i]
        control = "true" if i % 2 else "false"
        return (f"baseOffset: {base} lastOffset: {last} count: {count} baseSequence: {seq} lastSequence: {last_seq} "
                f"producerId: {PID} producerEpoch: {EPOCH} partitionLeaderEpoch: 0 isTransactional: true "
                f"isControl: {control} deleteHorizonMs: OptionalLong.empty position: {positions[i]} CreateTime: {ts} "
                f"size: {len(b)} magic: 2 compresscodec: none crc: {crc_of(b)} isvalid: true")

    assert dump(log, "--print-data-log") == [
        f"Dumping {log}",
        "Log starting offset: 0",
        batch_line(0, 0, 1, 2, 0, 1, TS),
        f"| offset: 0 CreateTime: {TS} keySize: 1 valueSize: 1 sequence: 0 headerKeys: [] key: a payload: 1",
        f"| offset: 1 CreateTime: {TS} keySize: 1 valueSize: 1 sequence: 1 headerKeys: [] key: b payload: 2",
        batch_line(1, 2, 2, 1, -1, -1, TS + 1),
        f"| offset: 2 CreateTime: {TS + 1} keySize: 4 valueSize: 6 sequence: -1 headerKeys: [] "
        "endTxnMarker: COMMIT coordinatorEpoch: 0",
        batch_line(2, 3, 3, 1, 2, 2, TS),
        f"| offset: 3 CreateTime: {TS} keySize: 1 valueSize: 1 sequence: 2 headerKeys: [] key: c payload: 3",
        batch_line(3, 4, 4, 1, -1, -1, TS + 1),
        f"| offset: 4 CreateTime: {TS + 1} keySize: 4 valueSize: 6 sequence: -1 headerKeys: [] "
        "endTxnMarker: ABORT coordinatorEpoch: 5",
    ]
    # --deep-iteration alone prints the marker too (Kafka prints it with the record's metadata)
    deep = dump(log, "--deep-iteration")
    assert deep[6] == (f"| offset: 2 CreateTime: {TS + 1} keySize: 4 valueSize: 6 sequence: -1 headerKeys: [] "
                       "endTxnMarker: COMMIT coordinatorEpoch: 0")
    assert deep[3] == f"| offset: 0 CreateTime: {TS} keySize: 1 valueSize: 1 sequence: 0 headerKeys: []"
    # without either, batch lines only
    assert dump(log) == [f"Dumping {log}", "Log starting offset: 0", *(line for line in (
        batch_line(0, 0, 1, 2, 0, 1, TS), batch_line(1, 2, 2, 1, -1, -1, TS + 1),
        batch_line(2, 3, 3, 1, 2, 2, TS), batch_line(3, 4, 4, 1, -1, -1, TS + 1)))]


def control_batch(base_offset: int, key: bytes | None, value: bytes | None) -> bytes:
    info = BatchInfo(base_offset=base_offset, producer_id=PID, producer_epoch=EPOCH, is_transactional=True,
                     is_control=True)
    return build_batch([key], [value], [TS], info=info)


def test_other_control_types_are_named_with_their_id_and_a_malformed_marker_is_named(tmp_path):
    log = segment(
        tmp_path,
        control_batch(0, struct.pack(">hh", 0, 2), b""),  # LEADER_CHANGE: KRaft's, never in a partition
        control_batch(1, struct.pack(">hh", 0, 77), b"x"),  # a type Kafka does not know
        control_batch(2, struct.pack(">hh", 0, COMMIT), b"\0\0\0"),  # a marker value cut short
        control_batch(3, b"\0", None),  # a key cut short
    )
    records = [line for line in dump(log, "--print-data-log") if line.startswith("| ")]
    assert records == [
        f"| offset: 0 CreateTime: {TS} keySize: 4 valueSize: 0 sequence: -1 headerKeys: [] controlType: LEADER_CHANGE(2)",
        f"| offset: 1 CreateTime: {TS} keySize: 4 valueSize: 1 sequence: -1 headerKeys: [] controlType: UNKNOWN(77)",
        f"| offset: 2 CreateTime: {TS} keySize: 4 valueSize: 3 sequence: -1 headerKeys: [] control record unreadable: "
        "end transaction marker value too short: 3 of the 6 bytes it must have at least (version int16, coordinator epoch int32)",
        f"| offset: 3 CreateTime: {TS} keySize: 1 valueSize: -1 sequence: -1 headerKeys: [] control record unreadable: "
        "control record key too short: 1 of the 4 bytes it must have at least (version int16, type int16)",
    ]


def aborted_txn(producer_id: int, first_offset: int, last_offset: int, last_stable_offset: int, version: int = 0) -> bytes:
    """One 34-byte entry of a .txnindex, as Kafka's AbortedTxn lays it out."""
    return struct.pack(
        ">hqqqq",
        version,              # version int16 (AbortedTxn.CURRENT_VERSION = 0)
        producer_id,          # producerId int64
        first_offset,         # firstOffset int64: the transaction's first batch
        last_offset,          # lastOffset int64: its ABORT marker
        last_stable_offset,   # lastStableOffset int64
    )


def test_a_transaction_index_prints_each_aborted_transaction(tmp_path):
    log = segment(tmp_path, txn_data(0, 0, [(b"a", b"1")]), marker(ABORT, 1, 0),
                  txn_data(2, 1, [(b"b", b"2")]), marker(ABORT, 3, 0))
    index = log.with_suffix(".txnindex")
    index.write_bytes(aborted_txn(PID, 0, 1, 2) + aborted_txn(2**63 - 1, 2, 3, 4))
    assert dump(index) == [
        f"Dumping {index}",
        f"version: 0 producerId: {PID} firstOffset: 0 lastOffset: 1 lastStableOffset: 2",
        "version: 0 producerId: 9223372036854775807 firstOffset: 2 lastOffset: 3 lastStableOffset: 4",
    ]
    # several files in one run, each under its own "Dumping" line, as Kafka's tool prints them
    both = CliRunner().invoke(main, ["dump-log", "--files", f"{index},{log}"])
    assert both.exit_code == 0 and both.stdout.splitlines()[3:5] == [f"Dumping {log}", "Log starting offset: 0"]


def test_an_empty_or_torn_transaction_index(tmp_path):
    part = tmp_path / "t-0"
    part.mkdir()
    empty = part / ("0" * 17 + "100.txnindex")
    empty.write_bytes(b"")
    assert dump(empty) == [f"Dumping {empty}"]  # Kafka prints nothing more for an index without entries
    torn = part / ("0" * 20 + ".txnindex")
    torn_bytes = aborted_txn(7, 10, 12, 13) + aborted_txn(7, 14, 15, 16)[:20]
    torn.write_bytes(torn_bytes)
    torn.chmod(0o444)  # dump-log only reads: a file it may not write is no obstacle
    assert dump(torn) == [
        f"Dumping {torn}",
        "version: 0 producerId: 7 firstOffset: 10 lastOffset: 12 lastStableOffset: 13",
        f"Found 20 invalid bytes at the end of {torn.name}",
    ]
    assert torn.read_bytes() == torn_bytes  # the torn tail is reported, not written over


def test_an_entry_of_another_version_is_refused_naming_the_file(tmp_path):
    part = tmp_path / "t-0"
    part.mkdir()
    index = part / ("0" * 20 + ".txnindex")
    index.write_bytes(aborted_txn(7, 10, 12, 13) + aborted_txn(7, 14, 15, 16, version=1))
    res = CliRunner().invoke(main, ["dump-log", "--files", str(index)])
    assert res.exit_code == 1 and "Traceback" not in res.output, res.output
    assert f"Error: {index}: Unexpected aborted transaction version 1 in transaction index {index} at position 34" in res.output
