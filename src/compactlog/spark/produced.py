"""Appends whose batches the JVM built: the plan it builds them by, and the checks they pass before staging.

Spark hands a Python sink its rows as Arrow, one copy of every column per row, which by itself costs
more CPU than Parquet's whole write. The format's JVM side (``java/ProducingWrite.java``) therefore acts
as the job's producer in the task's own thread: it routes rows, cuts and compresses Kafka batches (as a
Java client would) and hands the Python task whole batches, one row each. Everything the log decides
stays here: the producer plan (codec and level, batch size, the log's limits) is the Python one,
written for the JVM before the job starts, and every batch it built is validated with the append's
rules by the same :class:`~compactlog.staged_appends.BatchStager` before it is staged; the commit is the
usual one. A row the JVM could not route is sent as a problem, and the error raised here is the one the
Python path raises for it.
"""

from __future__ import annotations

from typing import Iterator

import pyarrow as pa

from ..errors import CompactLogError, InvalidRequestError, UnknownTopicOrPartitionError, shown
from ..reading import topic_metadata
from ..records.codecs import effective_level
from ..staged_appends import BatchStager
from .writer import WriteOptions, no_partition, no_topic, null_header_key, plan_for

PLAN_OPTION = "compactlog.produced.plan"  # set by the JVM side alone: where to write the plan
# The rows the JVM sends: one a batch it built, or one a row it could not route (``batch`` null).
BATCHES_DDL = "topic string, partition long, problem int, batch binary, now long"
NO_TOPIC, UNKNOWN_TOPIC, NO_PARTITION, NULL_HEADER_KEY = 1, 2, 3, 4
INFLATED_LIMIT = "message.max.decompressed.bytes"


def plan_text(opts: WriteOptions) -> str:
    """One line per topic to be written (the ``topic`` option's, else every topic of the data
    directory), tab-separated: name, partitions, codec id, level (the codec's default spelled out), the
    batch size, the cut target (``batch.size`` within the log's limit; 0 is a record a batch), that
    limit (the largest batch the log takes) and the most a batch's records may take uncompressed (the
    validator refuses a batch that inflates beyond it)."""
    lines = []
    topics = topic_metadata(opts.path)
    for topic in [opts.topic] if opts.topic is not None else sorted(topics):
        try:
            plan = plan_for(topic, topics.get(topic), opts.path, opts.batch_bytes)
        except CompactLogError:  # a row bound for it is sent back as a problem, and the error is raised then
            continue
        lines.append(f"{topic}\t{plan.partitioner.partitions}\t{int(plan.codec)}\t"
                     f"{effective_level(plan.codec, plan.level)}\t{plan.batch_bytes}\t{plan.cut_target}\t"
                     f"{plan.max_batch_bytes}\t{plan.config.broker.get(INFLATED_LIMIT)}\n")
    return "".join(lines)


def check_schema(schema) -> None:
    """Refuse the plan option on a DataFrame that is not the JVM side's batches (names and types)."""
    fields = [f"{f.name} {f.dataType.simpleString()}" for f in schema.fields]
    if ", ".join(fields).replace("bigint", "long") != BATCHES_DDL:
        raise InvalidRequestError(f'option "{PLAN_OPTION}" is for compactlog\'s JVM writer, which sends '
                                  f"{BATCHES_DDL}; this DataFrame has {schema.simpleString()}")


def stage_produced(opts: WriteOptions, iterator: Iterator[pa.RecordBatch]) -> list[str]:
    """Validate and stage the batches one task's JVM side built; returns the staging file (if any)."""
    topics = topic_metadata(opts.path)
    plans = {}
    with BatchStager(opts.staging) as stager:
        for rb in iterator:
            cols = rb.to_pydict() if rb.num_rows else {}
            for topic, p, problem, batch, now in zip(cols.get("topic", ()), cols.get("partition", ()),
                                                     cols.get("problem", ()), cols.get("batch", ()),
                                                     cols.get("now", ())):
                if problem:
                    raise _problem(opts, topic, p, problem)
                if topic not in plans:
                    plans[topic] = plan_for(topic, topics.get(topic), opts.path, opts.batch_bytes)
                stager.stage(topic, p, plans[topic].config, batch, now)
    return stager.files()


def _problem(opts: WriteOptions, topic: str | None, p: int, problem: int) -> Exception:
    """The error the Python path raises for the row the JVM could not route."""
    if problem == NO_TOPIC:
        return no_topic()
    if problem == UNKNOWN_TOPIC:
        plan_for(topic, topic_metadata(opts.path).get(topic), opts.path, opts.batch_bytes)  # its own error, if any
        return UnknownTopicOrPartitionError(f"Topic {shown(topic)} did not exist in {opts.path} when the write began.")
    if problem == NO_PARTITION:
        return no_partition(p, topic)
    if problem == NULL_HEADER_KEY:
        return null_header_key()
    return InvalidRequestError(f"compactlog's JVM writer sent an unknown problem code {problem}")
