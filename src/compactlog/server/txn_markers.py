"""Transaction markers: the COMMIT or ABORT control batch that ends a transaction in one partition.

Kafka's coordinator sends WriteTxnMarkers to each partition's leader; on one node the coordinator writes
them itself, through the same code the WriteTxnMarkers API (27) uses, which is here too for
``kafka-transactions --abort`` (Kafka's admin client sends it to abort a hanging transaction):

- a data partition gets the marker through the embedded API's ``Partition.write_txn_marker``, which ends
  the producer's transaction there (and indexes an aborted one);
- a ``__consumer_offsets`` partition gets it through the group coordinator's ``write_txn_marker``, which
  writes the marker and then makes the producer's pending offsets visible (commit) or drops them (abort).
  Before the group coordinator knows transactional offsets it has no such method and no pending offsets,
  so the marker is written to the partition directly.

Each write answers Kafka's code for that partition. A partition that no longer exists answers
UNKNOWN_TOPIC_OR_PARTITION (the coordinator then forgets it, as Kafka's skips a partition without a
leader, which was deleted); INVALID_PRODUCER_EPOCH means the partition already holds a newer epoch of
the producer; INVALID_REQUEST a marker that cannot be built (producer id -1, from WriteTxnMarkers);
anything else (a failing disk) is worth another try later.
"""

from __future__ import annotations

import logging

from ..errors import CompactLogError
from ..transactions.coordinator import OFFSETS_TOPIC
from .coordinator import running_group_coordinator
from .broker import Broker, Session, error_code
from .entities import make, response, schema
from .protocol import Request

log = logging.getLogger(__name__)

NONE, UNKNOWN_TOPIC_OR_PARTITION, CLUSTER_AUTHORIZATION_FAILED, INVALID_REQUEST = 0, 3, 31, 42
UNKNOWN_SERVER_ERROR = -1


def _write_to_partition(broker: Broker, topic: str, partition: int, producer_id: int, producer_epoch: int,
                        commit: bool, coordinator_epoch: int) -> int:
    part = broker.cl.find_partition(topic, partition)
    if part is None:
        return UNKNOWN_TOPIC_OR_PARTITION
    part.write_txn_marker(producer_id, producer_epoch, commit, coordinator_epoch)
    return NONE


async def write_marker(broker: Broker, topic: str, partition: int, producer_id: int, producer_epoch: int,
                       commit: bool, coordinator_epoch: int) -> int:
    """Write one marker; Kafka's code for the partition (0 when written)."""
    try:
        group = running_group_coordinator(broker) if topic == OFFSETS_TOPIC else None
        if group is not None:  # it writes the marker and applies or drops the offsets pending on it
            if broker.cl.find_partition(topic, partition) is None:
                return UNKNOWN_TOPIC_OR_PARTITION
            await group.write_txn_marker(partition, producer_id, producer_epoch, commit, coordinator_epoch)
            return NONE
        part = broker.cl.find_partition(topic, partition)
        if part is not None and part.producer_state_loaded:  # one small batch: written from the loop
            return _write_to_partition(broker, topic, partition, producer_id, producer_epoch, commit, coordinator_epoch)
        # else the marker's first need of the producer state reads the log's tail: not on the loop
        return await broker.blocking(_write_to_partition, broker, topic, partition, producer_id, producer_epoch,
                                     commit, coordinator_epoch)
    except CompactLogError as exc:
        log.warning("the %s marker of producer %d epoch %d in %s-%d was not written: %s",
                    "COMMIT" if commit else "ABORT", producer_id, producer_epoch, topic, partition, exc)
        return exc.code
    except ValueError as exc:  # a marker that cannot be built (WriteTxnMarkers naming producer id -1)
        log.warning("refused a marker for producer %d in %s-%d: %s", producer_id, topic, partition, exc)
        return INVALID_REQUEST
    except Exception:  # noqa: BLE001 - a bug must not stop the other partitions' markers
        log.exception("the marker of producer %d in %s-%d was not written", producer_id, topic, partition)
        return UNKNOWN_SERVER_ERROR
    finally:
        broker.data_arrived()  # a marker moves the last stable offset: parked read_committed fetches look again


# WriteTxnMarkers (27) ------------------------------------------------------------------------------
async def write_txn_markers(broker: Broker, req: Request, session: Session):
    """Kafka's rules: CLUSTER_ACTION on the cluster, or every partition CLUSTER_AUTHORIZATION_FAILED;
    per marker, per partition, the append's code (UNKNOWN_TOPIC_OR_PARTITION for a partition this node
    does not hold)."""
    s = schema(req)
    allowed = broker.authorize(session, "CLUSTER_ACTION", "CLUSTER")
    results = []
    for marker in req.body.markers:
        topics = []
        for t in marker.topics:
            codes = []
            for p in dict.fromkeys(t.partition_indexes):
                if not allowed:
                    code = CLUSTER_AUTHORIZATION_FAILED
                else:
                    code = await write_marker(broker, t.name, p, marker.producer_id, marker.producer_epoch,
                                              marker.transaction_result, marker.coordinator_epoch)
                codes.append(make(s.WritableTxnMarkerPartitionResult, partition_index=p, error_code=error_code(code)))
            topics.append(make(s.WritableTxnMarkerTopicResult, name=t.name, partitions=tuple(codes)))
        results.append(make(s.WritableTxnMarkerResult, producer_id=marker.producer_id, topics=tuple(topics)))
    return response(req, markers=tuple(results))


HANDLERS = {27: write_txn_markers}
