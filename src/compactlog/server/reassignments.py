"""ElectLeaders, AlterPartitionReassignments and ListPartitionReassignments on a one-node cluster.

These move leadership and replicas between brokers. With one broker, every partition's leader is its
preferred (and only) replica and no reassignment is ever in progress, so the answers are the ones
Kafka's controller gives for such a cluster, partition by partition, with its messages:

* ElectLeaders: a partition that exists needs no election (ELECTION_NOT_NEEDED, preferred and unclean
  alike: it has its leader); one that does not is UNKNOWN_TOPIC_OR_PARTITION. Asked for every partition
  (a null list), the answer lists every topic and, as Kafka leaves out the partitions that need no
  election, no partition.
* AlterPartitionReassignments: cancelling (null replicas) is NO_REASSIGNMENT_IN_PROGRESS; a target of
  this broker alone is the assignment the partition has, accepted with nothing to do; a target naming
  any other broker is INVALID_REPLICA_ASSIGNMENT, as for a broker that is not registered.
* ListPartitionReassignments: nothing in progress, ever.

Electing and reassigning need ALTER on the cluster, listing DESCRIBE (refused: CLUSTER_AUTHORIZATION_FAILED).
"""

from __future__ import annotations

from ..errors import shown
from .broker import NO_THROTTLE, Broker, Session, error_code
from .entities import make, response, schema
from .protocol import Request

UNKNOWN_TOPIC_OR_PARTITION, INVALID_REPLICA_ASSIGNMENT, CLUSTER_AUTHORIZATION_FAILED = 3, 39, 31
INVALID_REQUEST, ELECTION_NOT_NEEDED, NO_REASSIGNMENT_IN_PROGRESS = 42, 84, 85
ELECTION_TYPES = (0, 1)  # PREFERRED, UNCLEAN
NOT_NEEDED_MESSAGE = "Leader election not needed for topic partition."
NOT_AUTHORIZED_MESSAGE = "Cluster authorization failed."

Outcome = tuple[int, str | None]


# ElectLeaders -------------------------------------------------------------------------------------

def election(broker: Broker, topic: str, partition: int) -> Outcome:
    if not broker.cl.has_topic(topic):
        return UNKNOWN_TOPIC_OR_PARTITION, f"No such topic as {shown(topic, '')}"
    if broker.cl.find_partition(topic, partition) is None:
        return UNKNOWN_TOPIC_OR_PARTITION, f"No such partition as {shown(topic, '')}-{partition}"
    return ELECTION_NOT_NEEDED, NOT_NEEDED_MESSAGE


async def elect_leaders(broker: Broker, req: Request, session: Session):
    s = schema(req)
    body = req.body
    kind = getattr(body, "election_type", 0)
    asked = body.topic_partitions
    top = 0
    if not broker.authorize(session, "ALTER", "CLUSTER"):
        top = CLUSTER_AUTHORIZATION_FAILED
    elif kind not in ELECTION_TYPES:
        top = INVALID_REQUEST
    if top:
        message = NOT_AUTHORIZED_MESSAGE if top == CLUSTER_AUTHORIZATION_FAILED else f"Unknown election type {kind}"
        results = tuple(make(s.ReplicaElectionResult, topic=t.topic, partition_result=tuple(
            make(s.PartitionResult, partition_id=p, error_code=error_code(top), error_message=message)
            for p in t.partitions)) for t in asked or ())
        return response(req, throttle_time=NO_THROTTLE, error_code=error_code(top), replica_election_results=results)
    if asked is None:  # every partition: each needs no election, so no partition is listed
        results = tuple(make(s.ReplicaElectionResult, topic=name, partition_result=())
                        for name in broker.cl.list_topics())
    else:
        results = tuple(make(s.ReplicaElectionResult, topic=t.topic, partition_result=tuple(
            make(s.PartitionResult, partition_id=p, error_code=error_code(code), error_message=message)
            for p in t.partitions for code, message in [election(broker, t.topic, p)]))
            for t in asked)
    return response(req, throttle_time=NO_THROTTLE, error_code=error_code(0), replica_election_results=results)


# AlterPartitionReassignments ----------------------------------------------------------------------

def reassignment(broker: Broker, topic: str, partition: int, replicas) -> Outcome:
    """Kafka's controller's checks of one reassignment, in its order and words."""
    if not broker.cl.has_topic(topic):
        return UNKNOWN_TOPIC_OR_PARTITION, f"Unable to find a topic named {shown(topic, '')}."
    if broker.cl.find_partition(topic, partition) is None:
        return UNKNOWN_TOPIC_OR_PARTITION, f"Unable to find partition {shown(topic, '')}:{partition}."
    if replicas is None:
        return NO_REASSIGNMENT_IN_PROGRESS, "No partition reassignment is in progress."
    if not replicas:
        return INVALID_REPLICA_ASSIGNMENT, "The manual partition assignment includes an empty replica list."
    previous = None
    for b in sorted(replicas):
        if b != broker.node_id:
            return INVALID_REPLICA_ASSIGNMENT, (f"The manual partition assignment includes broker {b}, but no such "
                                                f"broker is registered.")
        if b == previous:
            return INVALID_REPLICA_ASSIGNMENT, (f"The manual partition assignment includes the broker {b} more "
                                                f"than once.")
        previous = b
    return 0, None  # this broker alone: the assignment the partition already has


async def alter_partition_reassignments(broker: Broker, req: Request, session: Session):
    s = schema(req)
    if not broker.authorize(session, "ALTER", "CLUSTER"):
        return response(req, throttle_time=NO_THROTTLE, error_code=error_code(CLUSTER_AUTHORIZATION_FAILED),
                        error_message=NOT_AUTHORIZED_MESSAGE, responses=())
    return response(req, throttle_time=NO_THROTTLE, error_code=error_code(0), error_message=None, responses=tuple(
        make(s.ReassignableTopicResponse, name=t.name, partitions=tuple(
            make(s.ReassignablePartitionResponse, partition_index=p.partition_index, error_code=error_code(code),
                 error_message=message)
            for p in t.partitions for code, message in [reassignment(broker, t.name, p.partition_index, p.replicas)]))
        for t in req.body.topics))


async def list_partition_reassignments(broker: Broker, req: Request, session: Session):
    if not broker.authorize(session, "DESCRIBE", "CLUSTER"):
        return response(req, throttle_time=NO_THROTTLE, error_code=error_code(CLUSTER_AUTHORIZATION_FAILED),
                        error_message=NOT_AUTHORIZED_MESSAGE, topics=())
    return response(req, throttle_time=NO_THROTTLE, error_code=error_code(0), error_message=None, topics=())


HANDLERS = {43: elect_leaders, 45: alter_partition_reassignments, 46: list_partition_reassignments}
