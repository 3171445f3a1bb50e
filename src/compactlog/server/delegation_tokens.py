"""CreateDelegationToken, RenewDelegationToken, ExpireDelegationToken, DescribeDelegationToken.

Kafka issues delegation tokens only when a master key is configured (``delegation.token.secret.key``);
without one every token request answers DELEGATION_TOKEN_AUTH_DISABLED. compactlog has no delegation
tokens (nor their SASL login), so it answers as such a Kafka broker does, checks included: a request on
a connection that did not log in (PLAINTEXT, or SSL without a client certificate) is
DELEGATION_TOKEN_REQUEST_NOT_ALLOWED first, and a renewer that is not a ``User`` INVALID_PRINCIPAL_TYPE.
"""

from __future__ import annotations

import datetime

from .broker import NO_THROTTLE, Broker, Session, error_code
from .entities import response
from .protocol import Request
from .security import SECURITY_PROTOCOL

AUTH_DISABLED, REQUEST_NOT_ALLOWED, INVALID_PRINCIPAL_TYPE = 61, 64, 67
NO_TIME = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc) - datetime.timedelta(milliseconds=1)  # -1


def _allowed(session: Session) -> bool:
    """Kafka's rule: not over PLAINTEXT, nor over SSL as the anonymous principal."""
    protocol = session.extra.get(SECURITY_PROTOCOL, "PLAINTEXT")
    return not (protocol == "PLAINTEXT" or protocol == "SSL" and session.principal == "User:ANONYMOUS")


def _code(session: Session) -> int:
    return AUTH_DISABLED if _allowed(session) else REQUEST_NOT_ALLOWED


async def create_delegation_token(broker: Broker, req: Request, session: Session):
    body = req.body
    requester_type, _, requester_name = session.principal.partition(":")
    owner_name = getattr(body, "owner_principal_name", None)
    owner_type, owner_name = ((body.owner_principal_type, owner_name) if owner_name
                              else (requester_type, requester_name))
    code = _code(session)
    if code == AUTH_DISABLED and any(r.principal_type != "User" for r in body.renewers):
        code = INVALID_PRINCIPAL_TYPE
    return response(req, throttle_time=NO_THROTTLE, error_code=error_code(code), principal_type=owner_type,
                    principal_name=owner_name, token_requester_principal_type=requester_type,
                    token_requester_principal_name=requester_name, issue_timestamp=NO_TIME, expiry_timestamp=NO_TIME,
                    max_timestamp=NO_TIME, token_id="", hmac=b"")


async def renew_delegation_token(broker: Broker, req: Request, session: Session):
    return response(req, throttle_time=NO_THROTTLE, error_code=error_code(_code(session)), expiry_timestamp=NO_TIME)


async def expire_delegation_token(broker: Broker, req: Request, session: Session):
    return response(req, throttle_time=NO_THROTTLE, error_code=error_code(_code(session)), expiry_timestamp=NO_TIME)


async def describe_delegation_token(broker: Broker, req: Request, session: Session):
    return response(req, throttle_time=NO_THROTTLE, error_code=error_code(_code(session)), tokens=())


HANDLERS = {38: create_delegation_token, 39: renew_delegation_token, 40: expire_delegation_token,
            41: describe_delegation_token}
