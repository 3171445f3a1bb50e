"""``transactions``: kafka-transactions.sh against a running broker (transactions live only there).

``list`` the transactional ids every coordinator holds (``--duration-filter``: only those open longer);
``describe --transactional-id`` one; ``describe-producers`` of a partition (its leader's producer state,
or ``--broker-id``'s); ``find-hanging`` transactions: open in a partition longer than
``--max-transaction-timeout`` minutes while the producer's transactional id is unknown to the
coordinators or does not have that partition in its transaction, so no marker will ever end it;
``abort`` one (an ABORT marker written by the partition's leader, found by its first offset or given by
producer id, epoch and coordinator epoch). The flags, tables, column headers and the words of the
refusals are kafka-transactions.sh's. The requests are in ``wire_transactions.py``.
"""

from __future__ import annotations

import logging
import time

import click

from ..errors import CompactLogError
from .client_properties import command_config_option
from .common import INT_MAX, LONG_MAX, LONG_MIN, Number, host_ports

log = logging.getLogger("compactlog.cli")

INT_MIN, SHORT_MAX = -(2**31), 2**15 - 1
MINUTE_MS = 60_000

LIST_HEADER = ("TransactionalId", "Coordinator", "ProducerId", "TransactionState")
DESCRIBE_HEADER = ("CoordinatorId", "TransactionalId", "ProducerId", "ProducerEpoch", "TransactionState",
                   "TransactionTimeoutMs", "CurrentTransactionStartTimeMs", "TransactionDurationMs", "TopicPartitions")
PRODUCERS_HEADER = ("ProducerId", "ProducerEpoch", "LatestCoordinatorEpoch", "LastSequence", "LastTimestamp",
                    "CurrentTransactionStartOffset")
HANGING_HEADER = ("Topic", "Partition", "ProducerId", "ProducerEpoch", "CoordinatorEpoch", "StartOffset",
                  "LastTimestamp", "Duration(min)")
BATCH = 500  # partitions per DescribeProducers request, as Kafka's tool batches them


def echo_table(header: tuple[str, ...], rows: list[tuple]) -> None:
    """Kafka's tools' table (ToolsUtils.prettyPrintTable): each cell padded to its column's widest, each
    followed by a tab."""
    cells = [list(header)] + [[str(v) for v in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    for row in cells:
        click.echo("".join(v.ljust(w) + "\t" for v, w in zip(row, widths)))


def failed(message: str, cause: BaseException | None = None) -> CompactLogError:
    """kafka-transactions' way to end: the message, then the cause's."""
    if cause is None:
        return CompactLogError(message)
    log.debug("%s", message, exc_info=cause)
    return CompactLogError(f"{message}: {cause}. Enable debug logging for additional detail.")


def _bootstrap(ctx: click.Context) -> str:
    """``--bootstrap-server``, required (asked here, not by click, so that ``transactions list --help`` works
    without it)."""
    if ctx.obj["bootstrap"] is None:
        raise click.UsageError("Missing option '--bootstrap-server'.", ctx=ctx.parent or ctx)
    return ctx.obj["bootstrap"]


def _connect(ctx: click.Context):
    from .wire_transactions import WireTransactions

    return WireTransactions(_bootstrap(ctx))


@click.group("transactions", context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--bootstrap-server", "bootstrap_server", metavar="HOST:PORT", callback=host_ports,
              help="The broker to connect to (a running compactlog serve, or any Kafka broker); several "
                   "comma-separated entries may be given. Required.")
@command_config_option
@click.pass_context
def transactions(ctx: click.Context, bootstrap_server: str | None) -> None:
    """Analyse producers' transactional state; detect hanging transactions and abort them (as
    kafka-transactions.sh)."""
    ctx.obj = {"bootstrap": bootstrap_server}


@transactions.command("list")
@click.option("--duration-filter", type=Number(LONG_MIN, LONG_MAX),
              help="Only transactions running longer than this many milliseconds (below 0: all).")
@click.pass_context
def list_(ctx: click.Context, duration_filter: int | None) -> None:
    """List transactions."""
    client = _connect(ctx)
    try:
        by_broker = client.list(duration_ms=duration_filter)
    except CompactLogError as exc:
        raise failed("Failed to list transactions", exc) from None
    echo_table(LIST_HEADER, [(t.transactional_id, broker, t.producer_id, t.state)
                             for broker, listings in by_broker.items() for t in listings])


@transactions.command("describe")
@click.option("--transactional-id", "transactional_id", required=True, help="The transactional id.")
@click.pass_context
def describe(ctx: click.Context, transactional_id: str) -> None:
    """Describe the state of an active transactional id."""
    client = _connect(ctx)
    try:
        d = client.describe([transactional_id])[transactional_id]
    except CompactLogError as exc:
        raise failed(f"Failed to describe transaction state of transactional-id `{transactional_id}`", exc) from None
    now = int(time.time() * 1000)
    start = "None" if d.start_time_ms is None else d.start_time_ms
    duration = "None" if d.start_time_ms is None else now - d.start_time_ms
    from .wire_transactions import partition_name

    echo_table(DESCRIBE_HEADER, [(d.coordinator_id, transactional_id, d.producer_id, d.producer_epoch, d.state,
                                  d.timeout_ms, start, duration,
                                  ",".join(partition_name(t, p) for t, p in d.partitions))])


@transactions.command("describe-producers")
@click.option("--broker-id", "broker_id", type=Number(0, INT_MAX),
              help="Describe the producer state on this broker's replica (by default: the leader's).")
@click.option("--topic", required=True, help="The topic.")
@click.option("--partition", required=True, type=Number(0, INT_MAX), help="The partition.")
@click.pass_context
def describe_producers(ctx: click.Context, broker_id: int | None, topic: str, partition: int) -> None:
    """Describe the states of active producers for a topic partition."""
    from .wire_transactions import partition_name

    client = _connect(ctx)
    where = "leader" if broker_id is None else f"broker {broker_id}"
    try:
        producers = client.producers([(topic, partition)], broker_id)[(topic, partition)]
    except CompactLogError as exc:
        raise failed(f"Failed to describe producers for partition {partition_name(topic, partition)} on {where}",
                     exc) from None
    echo_table(PRODUCERS_HEADER, [
        (p.producer_id, p.producer_epoch, p.coordinator_epoch, p.last_sequence, p.last_timestamp,
         "None" if p.current_txn_start_offset < 0 else p.current_txn_start_offset) for p in producers])


@transactions.command("find-hanging")
@click.option("--broker-id", "broker_id", type=Number(0, INT_MAX),
              help="The broker to search for hanging transactions.")
@click.option("--max-transaction-timeout", "max_timeout", type=Number(0, INT_MAX), default=15, show_default=True,
              help="The largest transaction timeout, in minutes: transactions open for less are not searched.")
@click.option("--topic", help="The topic to limit the search to (required if --partition is given).")
@click.option("--partition", type=Number(0, INT_MAX), help="The partition.")
@click.pass_context
def find_hanging(ctx: click.Context, broker_id: int | None, max_timeout: int, topic: str | None,
                 partition: int | None) -> None:
    """Find hanging transactions."""
    _bootstrap(ctx)
    if topic is None and broker_id is None:
        raise failed("The `find-hanging` command requires either --topic or --broker-id to limit the scope of the "
                     "search")
    if partition is not None and topic is None:
        raise failed("The --partition argument requires --topic to be provided")
    client = _connect(ctx)
    if topic is not None and partition is not None:
        partitions = [(topic, partition)]
    else:
        try:
            partitions = client.topic_partitions(None if topic is None else [topic], broker_id)
        except CompactLogError as exc:
            raise failed("Failed to describe 1 topics" if topic else "Failed to list topics", exc) from None
    hanging = hanging_transactions(client, partitions, broker_id, max_timeout * MINUTE_MS)
    now = int(time.time() * 1000)
    echo_table(HANGING_HEADER, [(t, p, s.producer_id, s.producer_epoch, s.coordinator_epoch,
                                 s.current_txn_start_offset, s.last_timestamp, (now - s.last_timestamp) // MINUTE_MS)
                                for (t, p), s in hanging])


def hanging_transactions(client, partitions: list[tuple[str, int]], broker_id: int | None, max_timeout_ms: int):
    """Kafka's rule: a transaction open longer than the largest timeout (the time since its producer's
    last batch), whose producer's transactional id no coordinator lists, or whose id's transaction does
    not hold this partition (so the coordinator will write no marker here)."""
    candidates = []
    now = int(time.time() * 1000)
    for i in range(0, len(partitions), BATCH):
        batch = partitions[i:i + BATCH]
        try:
            found = client.producers(batch, broker_id)
        except CompactLogError as exc:
            where = "their leaders" if broker_id is None else f"broker {broker_id}"
            raise failed(f"Failed to describe producers for {len(batch)} partitions on {where}", exc) from None
        for tp in batch:
            for s in found.get(tp, []):
                if s.current_txn_start_offset >= 0 and now - s.last_timestamp > max_timeout_ms:
                    candidates.append((tp, s))
    if not candidates:
        return []
    producer_ids = {s.producer_id for _, s in candidates}
    try:
        ids = {t.producer_id: t.transactional_id for listings in client.list(producer_ids=sorted(producer_ids)).values()
               for t in listings if t.producer_id in producer_ids}
    except CompactLogError as exc:
        raise failed(f"Failed to list transactions for {len(producer_ids)} producers", exc) from None
    descriptions = {}
    for tid in set(ids.values()):
        try:
            descriptions[tid] = client.describe_or_none(tid)
        except CompactLogError as exc:
            raise failed(f"Failed to describe {len(set(ids.values()))} transactions", exc) from None
    hanging = []
    for tp, s in candidates:
        d = descriptions.get(ids.get(s.producer_id, ""))
        if d is None or tp not in d.partitions:
            hanging.append((tp, s))
    return hanging


@transactions.command("abort")
@click.option("--topic", required=True, help="The topic.")
@click.option("--partition", required=True, type=Number(0, INT_MAX), help="The partition.")
@click.option("--start-offset", "start_offset", type=Number(0, LONG_MAX),
              help="The first offset of the transaction to abort (brokers on 3.0 and above need only this).")
@click.option("--producer-id", "producer_id", type=Number(0, LONG_MAX),
              help="The producer id (with --producer-epoch and --coordinator-epoch, for older brokers).")
@click.option("--producer-epoch", "producer_epoch", type=Number(0, SHORT_MAX), help="The producer epoch.")
@click.option("--coordinator-epoch", "coordinator_epoch", type=Number(INT_MIN, INT_MAX), help="The coordinator epoch.")
@click.pass_context
def abort(ctx: click.Context, topic: str, partition: int, start_offset: int | None, producer_id: int | None,
          producer_epoch: int | None, coordinator_epoch: int | None) -> None:
    """Abort a hanging transaction (requires administrative privileges: ClusterAction on the cluster)."""
    from .wire_transactions import partition_name

    _bootstrap(ctx)
    if start_offset is None and producer_id is None:
        raise failed("The transaction to abort must be identified either with --start-offset (for brokers on 3.0 "
                     "or above) or with --producer-id, --producer-epoch, and --coordinator-epoch (for older brokers)")
    if start_offset is None:
        if producer_epoch is None:
            raise failed("Missing required argument --producer-epoch")
        if coordinator_epoch is None:
            raise failed("Missing required argument --coordinator-epoch")
    client = _connect(ctx)
    name = partition_name(topic, partition)
    if start_offset is not None:
        try:
            producers = client.producers([(topic, partition)])[(topic, partition)]
        except CompactLogError as exc:
            raise failed(f"Failed to validate producer state for partition {name}", exc) from None
        state = next((s for s in producers if s.current_txn_start_offset == start_offset), None)
        if state is None:
            raise failed(f"Could not find any open transactions starting at offset {start_offset} on partition {name}")
        producer_id, producer_epoch, coordinator_epoch = state.producer_id, state.producer_epoch, \
            max(state.coordinator_epoch, 0)
    assert producer_id is not None and producer_epoch is not None and coordinator_epoch is not None
    # a transaction begun by a new producer and left hanging before any marker has no coordinator epoch
    # (-1 in DescribeProducers): 0 is at most any epoch a coordinator could have had
    coordinator_epoch = max(coordinator_epoch, 0)
    try:
        client.abort(topic, partition, producer_id, producer_epoch, coordinator_epoch)
    except CompactLogError as exc:
        spec = (f"AbortTransactionSpec(topicPartition={name}, producerId={producer_id}, "
                f"producerEpoch={producer_epoch}, coordinatorEpoch={coordinator_epoch})")
        raise failed(f"Failed to abort transaction {spec}", exc) from None
