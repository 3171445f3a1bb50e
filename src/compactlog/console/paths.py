"""How a topic or group name becomes one URL path segment, and back.

A group id may be any string: ``a/b``, ``?x``, ``#1``, ``%41``, ``..``. Percent-encoding every
character outside the unreserved set keeps ``/``, ``?``, ``#`` and ``%`` inside their segment, but not
dots: a browser resolves a segment that reads ``.`` or ``..`` -- written plainly or as ``%2E`` (the URL
standard counts both) -- before it sends the request, so ``/groups/..`` would load ``/``. Such a name
therefore gets a ``~`` in front (``/groups/~..``), which no browser touches, and so does a name that
starts with ``~`` itself, so that every name has exactly one segment and each segment one name.
Kafka's topic names cannot be ``.`` or ``..`` nor hold ``~``, so a topic's segment is its name; the
same two functions serve both, and the handlers read every name through :func:`name`.
"""

from __future__ import annotations

from urllib.parse import quote

ESCAPE = "~"
DOT_SEGMENTS = (".", "..")


def segment(name: str) -> str:
    """``name`` as one path segment, percent-encoded, with ``~`` in front of a dot segment or a leading ``~``."""
    text = str(name)
    encoded = quote(text, safe="")
    return ESCAPE + encoded if text in DOT_SEGMENTS or text.startswith(ESCAPE) else encoded


def name(decoded_segment: str) -> str:
    """The name a segment stands for; ``decoded_segment`` is the segment as the server decoded it."""
    return decoded_segment[len(ESCAPE):] if decoded_segment.startswith(ESCAPE) else decoded_segment


def path(prefix: str, subject: str, *rest: str) -> str:
    """``/prefix/<segment of subject>/rest...`` (``rest`` are fixed words of the console's routes)."""
    return "/".join([prefix, segment(subject), *rest])
