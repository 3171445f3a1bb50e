"""DescribeClientQuotas and AlterClientQuotas: client quotas, which this broker does not enforce.

Kafka throttles clients over their byte rates and request share (``producer_byte_rate``,
``consumer_byte_rate``, ``request_percentage``, ``controller_mutation_rate``) per user and client id.
compactlog has no throttling, so it keeps no quotas: describing them answers the truth, none; setting
one is refused with INVALID_REQUEST and a message saying quotas are not enforced, rather than stored
and then ignored (an operator who set a limit would believe it holds). Removing a quota succeeds,
there being none to remove, as Kafka answers for a quota never set. See docs/differences.md.

Describing needs DESCRIBE_CONFIGS on the cluster and altering ALTER_CONFIGS, as in Kafka (refused:
CLUSTER_AUTHORIZATION_FAILED).
"""

from __future__ import annotations

from .broker import NO_THROTTLE, Broker, Session, error_code
from .entities import make, response, schema
from .protocol import Request

CLUSTER_AUTHORIZATION_FAILED, INVALID_REQUEST = 31, 42
MATCH_TYPES = (0, 1, 2)  # EXACT, DEFAULT, SPECIFIED


def _entity_text(entity) -> str:
    parts = [f"{e.entity_type}={'<default>' if e.entity_name is None else e.entity_name}" for e in entity]
    return ", ".join(parts) or "no entity"


def refusal(entry) -> str | None:
    """Why an AlterClientQuotas entry is refused, None when it only removes quotas."""
    wanted = [op for op in entry.ops if not op.remove]
    if not wanted:
        return None
    keys = ", ".join(sorted({op.key for op in wanted}))
    return (f"compactlog does not enforce client quotas, so it does not store them: {keys} for "
            f"{_entity_text(entry.entity)} was not set.")


async def describe_client_quotas(broker: Broker, req: Request, session: Session):
    if not broker.authorize(session, "DESCRIBE_CONFIGS", "CLUSTER"):
        return response(req, throttle_time=NO_THROTTLE, error_code=error_code(CLUSTER_AUTHORIZATION_FAILED),
                        error_message="Cluster authorization failed.", entries=None)
    odd = [c.match_type for c in req.body.components if c.match_type not in MATCH_TYPES]
    if odd:
        return response(req, throttle_time=NO_THROTTLE, error_code=error_code(INVALID_REQUEST),
                        error_message=f"Unexpected match type {odd[0]}", entries=None)
    return response(req, throttle_time=NO_THROTTLE, error_code=error_code(0), error_message=None, entries=())


async def alter_client_quotas(broker: Broker, req: Request, session: Session):
    s = schema(req)
    allowed = broker.authorize(session, "ALTER_CONFIGS", "CLUSTER")
    out = []
    for entry in req.body.entries:
        why = refusal(entry) if allowed else "Cluster authorization failed."
        code = 0 if why is None else (INVALID_REQUEST if allowed else CLUSTER_AUTHORIZATION_FAILED)
        out.append(make(s.EntryData, error_code=error_code(code), error_message=why, entity=tuple(
            make(s.EntityData, entity_type=e.entity_type, entity_name=e.entity_name) for e in entry.entity)))
    return response(req, throttle_time=NO_THROTTLE, entries=tuple(out))


HANDLERS = {48: describe_client_quotas, 49: alter_client_quotas}
