"""LogManager: every partition log in one data directory, their topics, checkpoints and housekeeping.

Layout of a data directory (Kafka's, plus one folder of topic metadata)::

    <data>/
      .lock                                  held while a process has the directory open
      .kafka_cleanshutdown                   present only after a clean close
      recovery-point-offset-checkpoint       Kafka's checkpoint text format
      log-start-offset-checkpoint
      cleaner-offset-checkpoint              (written by the log cleaner)
      __topics/<topic>.json                  topic id, partition count, config overrides (see topics.py)
      <topic>-<partition>/                   segments, partition.metadata

Kafka keeps topic metadata in its controller's log; with no controller here, one small JSON file per
topic, written atomically, plays that part. Per-topic configs are stored as the strings the user gave,
so ``describe`` shows them as they were set.
"""

from __future__ import annotations

import fcntl
import logging
import os
import shutil
import threading
import uuid
from pathlib import Path

from ..clock import SYSTEM, Time
from ..errors import (
    CompactLogError,
    InvalidPartitionsError,
    OffsetOutOfRangeError,
    KafkaStorageError,
    UnknownTopicOrPartitionError,
    shown,
)
from ..records.codecs import allow_reading_up_to
from . import files, topic_rules
from .checkpoint import OffsetCheckpointFile
from .broker_config import BrokerConfig
from .log_config import LogConfig, validate_topic_overrides
from .failure import LogDirFailure, describe
from .log import Log
from .topics import (PartitionInfo, TopicDescription, load_topics, new_topic_id, partition_dirs,
                     partition_metadata_text, write_topic)

log = logging.getLogger(__name__)


class LogManager:
    """Opens (and recovers) a data directory; creates, deletes and alters topics; runs retention."""

    def __init__(self, data_dir: str | os.PathLike[str], broker: BrokerConfig | None = None, time: Time = SYSTEM,
                 full_recovery: bool = False) -> None:
        """``full_recovery``: check and rebuild every segment as after an unclean shutdown from offset 0
        (``compactlog verify --repair``), whatever the marker and checkpoints say."""
        self.dir = Path(data_dir)
        self.full_recovery = full_recovery
        self.broker = broker if broker is not None else BrokerConfig({})
        self.time = time
        self.lock = threading.RLock()
        self.failure = LogDirFailure(self.dir)
        allow_reading_up_to(self.broker.get("message.max.decompressed.bytes"))
        try:
            self.dir.mkdir(parents=True, exist_ok=True)
            if any(files.is_segment_file(n) and n.endswith(files.LOG_SUFFIX) for n in os.listdir(self.dir)):
                raise KafkaStorageError(f"{self.dir} holds segment files: it is a partition directory, not a data "
                                        f"directory (give the directory that holds the <topic>-<partition> folders)")
            lock_fd = files.try_lock(self.dir / files.LOCK_FILE)
        except OSError as exc:
            raise KafkaStorageError(f"cannot use {self.dir} as a data directory: {describe(exc)}") from None
        if lock_fd is None:
            raise KafkaStorageError(
                f"Failed to acquire lock on file .lock in {self.dir}. A compactlog process is already using this data directory."
            )
        self._lock_fd = lock_fd
        self.recovery_checkpoint = OffsetCheckpointFile(self.dir / files.RECOVERY_POINT_CHECKPOINT)
        self.start_checkpoint = OffsetCheckpointFile(self.dir / files.LOG_START_OFFSET_CHECKPOINT)
        self.logs: dict[tuple[str, int], Log] = {}
        self.topics: dict[str, dict] = {}
        self._closed = False
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        # When each periodic task of ``housekeep`` last ran (ms); they first run an interval after the open.
        self._last_done = dict.fromkeys(("retention", "checkpoint", "producer expiry"), time.milliseconds())
        # Hooks for the layers above (the cleaner pauses or forgets a partition on these).
        self.on_partition_deleted: list = []  # (topic, partition) -> None, before the log is taken away
        self.on_partition_removed: list = []  # (topic, partition) -> None, once it is out of ``logs``
        self.on_config_changed: list = []  # (topic, LogConfig) -> None
        self.around_truncation: list = []  # context managers (topic, partition, offset): the cleaner pauses
        try:
            self._load()
        except BaseException:
            self._abandon()
            raise

    def _abandon(self) -> None:
        """A failed open: close what was opened and release the lock, so a fixed directory opens again."""
        for lg in self.logs.values():
            for seg in lg.segments:
                seg.close_handlers()
        self._closed = True
        os.close(self._lock_fd)

    # loading ------------------------------------------------------------------------------------
    def _load(self) -> None:
        marker = self.dir / files.CLEAN_SHUTDOWN_FILE
        clean = marker.exists()
        recovery = self._read_hint(self.recovery_checkpoint)
        starts = self._read_hint(self.start_checkpoint)
        cleaned = self._read_hint(OffsetCheckpointFile(self.dir / files.CLEANER_OFFSET_CHECKPOINT))
        for child in sorted(self.dir.iterdir()):
            if child.is_dir() and child.name.endswith(files.DELETE_SUFFIX):
                shutil.rmtree(child, ignore_errors=True)
        self.topics.update(load_topics(self.dir, strict=True))
        for parsed, child in sorted(partition_dirs(self.dir).items()):
            topic, partition = parsed
            try:
                self.logs[parsed] = Log(
                    child, self.log_config(topic), time=self.time,
                    recovery_point=recovery.get(parsed, 0), log_start_offset=starts.get(parsed, 0),
                    clean_shutdown=clean, failure=self.failure, full_recovery=self.full_recovery,
                    # A compacted log may have gaps in any closed segment: the cleaner's checkpoint follows its
                    # swap, so after a crash between the two it lags the gaps already on disk.
                    gaps_allowed_below=None if self.log_config(topic).compact else cleaned.get(parsed, 0),
                    used_below=cleaned.get(parsed, 0),
                    producer_id_expiration_ms=self.broker.get("producer.id.expiration.ms"),
                )
            except OSError as exc:
                raise KafkaStorageError(f"cannot open partition {child.name} in {self.dir}: {describe(exc)}") from None
        with self.failure.guard(f"opening {self.dir}"):
            for topic, meta in self.topics.items():  # a crash during create (or another broker) left some out
                for p in range(meta["partitions"]):
                    if (topic, p) not in self.logs:  # the checkpoints remember the offsets its folder held
                        used = max(h.get((topic, p), 0) for h in (recovery, starts, cleaned))
                        self._create_log(topic, p, used_below=used)
            marker.unlink(missing_ok=True)
        self.checkpoint()

    def _read_hint(self, checkpoint: OffsetCheckpointFile) -> dict[tuple[str, int], int]:
        """A checkpoint is a hint: the log is the truth. One that cannot be read is ignored with a
        warning (recovery then checks more of the log), never obeyed."""
        try:
            return checkpoint.read()
        except (OSError, CompactLogError) as exc:
            log.warning("ignoring %s: %s", checkpoint.path.name, exc)
            return {}

    def log_config(self, topic: str) -> LogConfig:
        """The topic's configs; UnknownTopicOrPartitionError once it is gone (a reader racing a delete)."""
        return LogConfig(self._require(topic).get("config", {}), self.broker)

    def _create_log(self, topic: str, partition: int, meta: dict | None = None, used_below: int = 0) -> Log:
        """A new partition's log; ``meta``: the topic's metadata before it is published in ``topics``;
        ``used_below``: offsets already handed out in it (its folder was removed), where it goes on."""
        d = self.dir / files.partition_dir_name(topic, partition)
        d.mkdir(exist_ok=True)
        meta = meta if meta is not None else self.topics[topic]
        files.atomic_write(d / files.PARTITION_METADATA, partition_metadata_text(meta["topic_id"]))
        lg = Log(d, LogConfig(meta.get("config", {}), self.broker), time=self.time, clean_shutdown=True,
                 failure=self.failure, used_below=used_below,
                 producer_id_expiration_ms=self.broker.get("producer.id.expiration.ms"))
        self.logs[(topic, partition)] = lg
        return lg

    def _write_topic(self, meta: dict) -> None:
        write_topic(self.dir, meta)

    # topics -------------------------------------------------------------------------------------
    def check_new_topic(self, name: str, partitions: int | None = None,
                        config: dict[str, str] | None = None) -> tuple[int, dict[str, str]]:
        """Every check ``create_topic`` makes, with nothing written: the partition count the topic would
        get and its normalized overrides. CreateTopics' ``validate_only`` answers from this alone."""
        self.check_name_free(name)
        n = self.broker.get("num.partitions") if partitions is None or partitions == -1 else partitions
        if not isinstance(n, int) or isinstance(n, bool) or n <= 0:
            raise InvalidPartitionsError(f"Number of partitions must be larger than 0, got {partitions}.")
        topic_rules.check_dir_names(name, n)
        overrides = validate_topic_overrides(dict(config or {}))
        with self.lock:
            self.check_name_free(name)
            self._check_partition_limit(n, f"Cannot create topic {shown(name)} with {n} partitions",
                                        records=1 + len(overrides) + n)
        return n, overrides

    def check_name_free(self, name: str) -> None:
        """Checked first, so that creating an existing topic says so whatever else is wrong with the
        request, as Kafka answers (``topic_rules.check_name_free``)."""
        with self.lock:
            topic_rules.check_name_free(self.topics, name)

    def _check_partition_limit(self, adding: int, what: str, records: int | None = None) -> None:
        topic_rules.check_partition_limit(self.topics, self.broker.get("max.broker.partitions"), adding, what, records)

    def create_topic(self, name: str, partitions: int | None = None, config: dict[str, str] | None = None) -> TopicDescription:
        """Create a topic. Everything is checked before anything is written (name, count, configs, the
        partition limit); a failure while writing removes what was written, so no half-made topic is left."""
        with self.lock:
            n, overrides = self.check_new_topic(name, partitions, config)
            topic_id = new_topic_id()
            meta = {"name": name, "topic_id": topic_id, "partitions": n, "config": overrides}
            with self.failure.guard(f"creating topic {name}"):
                try:
                    self._write_topic(meta)
                    for p in range(n):
                        self._create_log(name, p, meta)
                    self.topics[name] = meta  # last: readers never see a topic whose logs are not all there
                except BaseException:
                    self._remove_half_made(name)
                    raise
        return self.describe_topic(name)

    def add_partitions(self, name: str, count: int, validate_only: bool = False) -> TopicDescription | None:
        """Grow a topic to ``count`` partitions (Kafka's CreatePartitions; ``kafka-topics --alter``).

        Only growth: existing partitions keep their data and keyed records hash differently from now on,
        as in Kafka. Crash-safe in the way ``create_topic`` is: the new count is written first, then the
        new partition directories, and an open after a crash between the two makes the missing ones; a
        failure while writing puts the old count back and removes the directories made. ``validate_only``
        runs every check and writes nothing (returns None)."""
        with self.lock:
            meta = self._require(name)
            have = meta["partitions"]
            if not isinstance(count, int) or isinstance(count, bool) or count <= have:
                raise InvalidPartitionsError(
                    f"Topic {shown(name)} has {have} partition{'s' if have != 1 else ''}; partitions can only be added, "
                    f"so the new count must be more than {have}, not {count}.")
            topic_rules.check_dir_names(name, count)
            self._check_partition_limit(count - have, f"Cannot grow topic {shown(name)} to {count} partitions")
            if validate_only:
                return None
            grown = {**meta, "partitions": count}
            with self.failure.guard(f"adding partitions to topic {name}"):
                try:
                    self._write_topic(grown)
                    for p in range(have, count):
                        self._create_log(name, p)
                    self.topics[name] = grown  # last: readers never see a count whose logs are not there yet
                except BaseException:
                    self._undo_growth(meta, count)
                    raise
        return self.describe_topic(name)

    def _undo_growth(self, meta: dict, count: int) -> None:
        """Back to ``meta``'s partition count after a failed ``add_partitions`` (best effort: the directory
        may be offline; an open then makes the count's partitions and ignores none)."""
        name = meta["name"]
        self.topics[name] = meta
        try:
            self._write_topic(meta)
        except OSError:
            pass
        for p in range(meta["partitions"], count):
            lg = self.logs.pop((name, p), None)
            if lg is not None:
                for seg in lg.segments:
                    seg.close_handlers()
            shutil.rmtree(self.dir / files.partition_dir_name(name, p), ignore_errors=True)

    def _remove_half_made(self, name: str) -> None:
        """Partition folders first, the metadata last: folders without metadata would read as a Kafka
        broker's topic with broker defaults (delete policy, 7-day retention)."""
        self.topics.pop(name, None)
        for k in [k for k in self.logs if k[0] == name]:
            lg = self.logs.pop(k)
            for seg in lg.segments:
                seg.close_handlers()
        for child in self.dir.glob(f"{name}-*"):
            if files.parse_partition_dir(child.name) and files.parse_partition_dir(child.name)[0] == name:
                shutil.rmtree(child, ignore_errors=True)
        files.topic_file(self.dir, name).unlink(missing_ok=True)

    def _require(self, name: str) -> dict:
        meta = self.topics.get(name)
        if meta is None:
            raise UnknownTopicOrPartitionError(f"Topic {shown(name)} does not exist.")
        return meta

    def delete_topic(self, name: str) -> None:
        """Mark the partition directories deleted (renamed ``...-delete``), then remove the metadata, then
        the directories' contents. A crash in between leaves the topic with its own configs and empty
        partitions, never its folders without metadata (which would read as a Kafka broker's topic with
        broker defaults: delete policy, 7-day retention)."""
        with self.lock, self.failure.guard(f"deleting topic {name}"):
            self._require(name)
            doomed = [(k, lg) for k, lg in self.logs.items() if k[0] == name]
            for hook in self.on_partition_deleted:
                for k, _ in doomed:
                    hook(k)
            del self.topics[name]
            marked = []
            for k, lg in doomed:
                del self.logs[k]
                for seg in lg.segments:
                    seg.close_handlers()
                lg.delete_expired_files(force=True)
                marked.append(lg.dir.with_name(files.delete_dir_name(lg.dir.name, uuid.uuid4().hex, files.DELETE_SUFFIX)))
                os.replace(lg.dir, marked[-1])
            files.fsync_dir(self.dir)
            topic_file = files.topic_file(self.dir, name)
            if topic_file.exists():  # a topic found from a Kafka directory's folders has none
                topic_file.unlink()
                files.fsync_dir(topic_file.parent)
            for hook in self.on_partition_removed:
                for k, _ in doomed:
                    hook(k)
            for m in marked:
                shutil.rmtree(m, ignore_errors=True)
            self.checkpoint()

    def list_topics(self) -> list[str]:
        return sorted(self.topics)

    def partitions_for(self, name: str) -> int:
        return self._require(name)["partitions"]

    def describe_topic(self, name: str) -> TopicDescription:
        meta = self._require(name)
        parts = []
        for p in range(meta["partitions"]):
            lg = self.get_log(name, p)  # Kafka's error, not a KeyError, when a delete wins the race
            parts.append(PartitionInfo.of(p, lg))
        return TopicDescription(name, meta["topic_id"], parts, self.log_config(name))

    def alter_topic_config(self, name: str, set_configs: dict[str, str] | None = None,
                           delete_configs: list[str] | None = None, validate_only: bool = False) -> LogConfig:
        """kafka-configs --alter: add or replace overrides, remove others; applied to open logs at once.
        ``validate_only``: the config the topic would get, with nothing written or applied."""
        with self.lock:
            meta = self._require(name)
            self.failure.check()
            current = dict(meta.get("config", {}))
            from .log_config import alter as alter_overrides

            updated = alter_overrides(current, set_configs or {}, delete_configs or [])
            if validate_only:
                return LogConfig(updated, self.broker)
            new_meta = {**meta, "config": updated}
            with self.failure.guard(f"altering the configs of {name}"):
                self._write_topic(new_meta)
            self.topics[name] = new_meta
            cfg = self.log_config(name)
            for (t, _), lg in self.logs.items():
                if t == name:
                    lg.update_config(cfg)
            for hook in self.on_config_changed:
                hook(name, cfg)
            return cfg

    def delete_records(self, topic: str, partition: int, offset: int, checkpoint: bool = True) -> int:
        """Kafka's DeleteRecords: move the partition's log start offset up to ``offset`` (-1: the high
        watermark); returns the new log start offset. Readers stop seeing the records below it at once;
        the segments wholly below it go at the next retention run. The checkpoint makes the move survive
        a crash (``checkpoint=False`` lets a caller moving many partitions write it once)."""
        lg = self.get_log(topic, partition)
        with lg.lock:
            target = lg.high_watermark if offset == -1 else offset
            if not isinstance(target, int) or isinstance(target, bool) or not 0 <= target <= lg.high_watermark:
                raise OffsetOutOfRangeError(
                    f"Cannot delete the records of {lg.name} before offset {offset}: it must lie between 0 and the "
                    f"high watermark {lg.high_watermark} (or be -1 for the high watermark).")
            lg.increment_log_start_offset(target)
            start = lg.log_start_offset
        if checkpoint:
            self.checkpoint()
        return start

    def truncate(self, topic: str, partition: int, offset: int) -> bool:
        """Remove every record at or after ``offset`` (Kafka truncates a replica this way); cleaning of
        the partition is paused meanwhile and its checkpoint lowered if it was beyond ``offset``."""
        lg = self.get_log(topic, partition)
        if not isinstance(offset, int) or isinstance(offset, bool) or offset < 0:
            raise OffsetOutOfRangeError(f"cannot truncate {lg.name} to offset {offset}: offsets are >= 0")
        from contextlib import ExitStack

        with ExitStack() as stack:
            for hook in self.around_truncation:
                stack.enter_context(hook(topic, partition, offset))
            # Lower the recovery point on disk first: a crash between the two steps must not leave a
            # checkpoint beyond the truncated log (which reads as flushed data gone missing).
            self.checkpoint(lowered={(topic, partition): offset})
            done = lg.truncate_to(offset)
        self.checkpoint()
        return done

    def get_log(self, topic: str, partition: int) -> Log:
        lg = self.logs.get((topic, partition))
        if lg is None:
            if topic in self.topics:
                raise UnknownTopicOrPartitionError(
                    f"Partition {partition} of topic {shown(topic)} does not exist (the topic has {self.topics[topic]['partitions']})."
                )
            raise UnknownTopicOrPartitionError(f"Topic {shown(topic)} does not exist.")
        return lg

    # housekeeping ---------------------------------------------------------------------------------
    def checkpoint(self, lowered: dict[tuple[str, int], int] | None = None) -> None:
        """Write recovery points and log start offsets (Kafka's periodic checkpoint tasks); ``lowered``
        caps some recovery points (before a truncation)."""
        with self.lock:
            logs = dict(self.logs)
        lowered = lowered or {}
        with self.failure.guard("writing checkpoints"):
            self.recovery_checkpoint.write({k: min(lg.recovery_point, lowered.get(k, lg.recovery_point))
                                            for k, lg in logs.items()})
            self.start_checkpoint.write(
                {k: lg.log_start_offset for k, lg in logs.items() if lg.log_start_offset > lg.segments[0].base_offset}
            )

    def run_retention(self, topic: str | None = None) -> dict[tuple[str, int], int]:
        """Delete segments by log start offset, ``retention.ms`` and ``retention.bytes`` (delete policy).

        Compacted topics get only the log-start-offset rule here; their ``compact,delete`` retention runs
        in the cleaner's loop, as in Kafka. Returns segments deleted per partition.
        """
        with self.lock:
            logs = {k: lg for k, lg in self.logs.items() if topic is None or k[0] == topic}
        done = {}
        for k, lg in logs.items():
            n = lg.delete_old_segments()
            lg.delete_expired_files()
            if n:
                done[k] = n
        if done:
            self.checkpoint()
        return done

    def remove_expired_producers(self, now: int | None = None) -> int:
        """Forget, in every partition, the idempotent producers idle for ``producer.id.expiration.ms``
        (Kafka's periodic check, run by housekeeping); how many were forgotten."""
        with self.lock:
            logs = list(self.logs.values())
        return sum(lg.remove_expired_producers(now) for lg in logs)

    def flush(self) -> None:
        with self.lock:
            for lg in self.logs.values():
                lg.flush()
        self.checkpoint()

    def start_background(self) -> None:
        """Periodic retention, file deletion, checkpoints and producer expiry, for long-running processes."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._housekeeping, name="compactlog-log-manager", daemon=True)
            self._thread.start()

    def _due(self, task: str, interval_config: str, now: int) -> bool:
        if now - self._last_done[task] < self.broker.get(interval_config):
            return False
        self._last_done[task] = now
        return True

    def housekeep(self, now: int | None = None) -> None:
        """One round of housekeeping at ``now`` (ms): the files whose delete delay has passed, and each of
        retention, checkpoints and producer expiry whose interval has passed since it last ran. The
        background thread runs a round every tick; a test with an injected clock runs them itself."""
        now = self.time.milliseconds() if now is None else now
        if self._due("retention", "log.retention.check.interval.ms", now):
            self.run_retention()
        for lg in list(self.logs.values()):
            lg.delete_expired_files(now)
        if self._due("checkpoint", "log.flush.offset.checkpoint.interval.ms", now):
            self.checkpoint()
        if self._due("producer expiry", "producer.id.expiration.check.interval.ms", now):
            self.remove_expired_producers(now)

    def _housekeeping(self) -> None:
        tick = min(self.broker.get("log.retention.check.interval.ms"),
                   self.broker.get("log.flush.offset.checkpoint.interval.ms"),
                   self.broker.get("producer.id.expiration.check.interval.ms"), 1000) / 1000
        while not self._stop.wait(tick):
            try:
                self.housekeep()
            except Exception:  # keep housekeeping alive; the next tick retries
                log.exception("log manager housekeeping failed")

    def close(self) -> None:
        """Flush, checkpoint, write the clean-shutdown marker and release the directory lock. The lock
        is released whatever fails; the marker is written only if nothing did (an offline directory
        gets no marker, so the next open checks its logs)."""
        if self._closed:
            return
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        first: BaseException | None = None
        with self.lock:
            try:
                for lg in self.logs.values():
                    try:
                        lg.close()
                    except CompactLogError as exc:
                        first = first or exc
                if not self.failure.offline:
                    self.checkpoint()
                    with self.failure.guard("writing the clean-shutdown marker"):
                        files.atomic_write(self.dir / files.CLEAN_SHUTDOWN_FILE, "")
            except CompactLogError as exc:
                first = first or exc
            finally:
                self._closed = True
                fcntl.flock(self._lock_fd, fcntl.LOCK_UN)
                os.close(self._lock_fd)
        if first is not None:
            raise first

    def __enter__(self) -> "LogManager":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
