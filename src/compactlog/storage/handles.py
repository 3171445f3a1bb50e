"""A bounded pool of open file descriptors for the segment and index files of an owning process.

Kafka keeps every segment file of every partition open, and operators raise ``ulimit -n`` to match.
We keep at most ``capacity`` descriptors open (a share of the soft ``RLIMIT_NOFILE``) and reopen a file
by name when it is needed again, as RocksDB's ``max_open_files`` does, so a directory with thousands of
segments opens and runs under a small limit.

Owners (a segment's ``.log``, an index file) implement ``_open_handle() -> int`` and keep the
descriptor in ``_handle``. Users borrow it with ``with POOL.use(owner) as fd``: a borrowed descriptor is
never closed under its user. A file that is about to be renamed away or unlinked while readers may still
hold it is ``detach``-ed: its descriptor leaves the pool, stays open, and is closed by its owner once no
reader refers to it, so a reader sees the old bytes or the new ones, never a missing file.
"""

from __future__ import annotations

import os
import resource
import threading
from collections import OrderedDict
from contextlib import contextmanager
from typing import Iterator, Protocol


class HandleOwner(Protocol):
    _handle: int
    _borrows: int  # borrowers holding the descriptor now
    _close_pending: bool  # close it when the last borrower returns it
    _pooled: bool  # the pool may close it when idle (not once detached)

    def _open_handle(self) -> int: ...


def default_capacity() -> int:
    """Half the soft descriptor limit (the rest is for sockets, pipes and libraries), at least 16."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY or soft <= 0:
        soft = 1 << 16
    return max(16, min(soft // 2, 1 << 15))


class HandlePool:
    """Open descriptors by owner, least recently used first; ``capacity`` bounds the pooled ones.

    Each owner carries its own count of borrowers (``_borrows``) and whether its descriptor is to be
    closed when the last one returns it (``_close_pending``), so borrowing costs one lock and no
    lookups: it runs for every read and append."""

    def __init__(self, capacity: int | None = None) -> None:
        self.capacity = default_capacity() if capacity is None else capacity
        self.lock = threading.Lock()
        self._open: OrderedDict[int, HandleOwner] = OrderedDict()  # pooled: may be closed when idle

    @contextmanager
    def use(self, owner: HandleOwner) -> Iterator[int]:
        fd = self.acquire(owner)
        try:
            yield fd
        finally:
            self.release(owner)

    def acquire(self, owner: HandleOwner) -> int:
        """The owner's descriptor, opened (closing the least recently used idle one) if needed."""
        with self.lock:
            fd = owner._handle
            if fd < 0:
                self._make_room()
                fd = owner._handle = owner._open_handle()
                self._open[id(owner)] = owner
            elif owner._pooled:
                try:
                    self._open.move_to_end(id(owner))
                except KeyError:  # detached: not the pool's to track
                    owner._pooled = False
            owner._borrows += 1
            return fd

    def release(self, owner: HandleOwner) -> None:
        fd = -1
        with self.lock:
            owner._borrows -= 1
            if owner._borrows == 0 and owner._close_pending:
                owner._close_pending = False
                fd, owner._handle = owner._handle, -1
        if fd >= 0:
            os.close(fd)

    def close(self, owner: HandleOwner) -> None:
        """Close the owner's descriptor: now, or when its last borrower returns it (a descriptor is
        never closed under a reader, whose number the kernel could otherwise hand to another file)."""
        with self.lock:
            self._open.pop(id(owner), None)
            owner._pooled = True  # if it is opened again, it is the pool's again
            if owner._borrows > 0:
                owner._close_pending = True
                return
            fd, owner._handle = owner._handle, -1
        if fd >= 0:
            os.close(fd)

    def detach(self, owner: HandleOwner) -> None:
        """Open the owner's descriptor if needed and take it out of the pool: it stays open until the
        owner closes it (readers of a segment being deleted keep reading through it)."""
        with self.lock:
            if owner._handle < 0:
                owner._handle = owner._open_handle()
            self._open.pop(id(owner), None)
            owner._pooled = False

    def rename(self, rename) -> None:
        """Run ``rename()``, which renames a file and updates its owner's path, so that no reopen by
        name can fall between the two."""
        with self.lock:
            rename()

    def _make_room(self) -> None:
        if len(self._open) < self.capacity:
            return
        for key, victim in list(self._open.items()):
            if victim._borrows > 0:
                continue
            del self._open[key]
            fd, victim._handle = victim._handle, -1
            if fd >= 0:
                os.close(fd)
            if len(self._open) < self.capacity:
                return

    @property
    def open_count(self) -> int:
        return len(self._open)


POOL = HandlePool()
