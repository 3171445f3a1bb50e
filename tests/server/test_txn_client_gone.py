"""A transactional request whose client goes away while the coordinator stores its change.

The connection's task is cancelled when the client's socket closes (a SIGKILLed producer), which
cancels the handler awaiting the write to ``__transaction_state``. The write must go on to its end (the
change adopted, or the old state restored): were it dropped half way, the id would keep its ``pending``
mark and answer CONCURRENT_TRANSACTIONS to every later request, the next instance's InitProducerId
included, until a restart. Kafka's coordinator finishes an append whatever became of the connection.
"""

from __future__ import annotations

import asyncio

from test_txn_service import ids, run, stored

from compactlog.transactions.state import COMPLETE_ABORT, EMPTY, ONGOING, PREPARE_ABORT


def test_a_cancelled_add_partitions_still_ends_its_write_and_the_next_instance_fences(tmp_path):
    async def scenario(broker, txn):
        new_id = ids()
        _, pid, epoch = await txn.init_producer_id("app", 10_000, None, new_id)
        real = txn.store.append
        started = asyncio.Event()

        async def slow_append(*args, **kwargs):
            started.set()
            await asyncio.sleep(0.2)  # a slow disk: the client is gone before the write ends
            return await real(*args, **kwargs)
        txn.store.append = slow_append
        handler = asyncio.get_running_loop().create_task(txn.add_partitions("app", pid, epoch, [("t", 0)]))
        await started.wait()
        handler.cancel()  # what connection_lost does to the connection's task
        txn.store.append = real
        # the next instance: CONCURRENT_TRANSACTIONS while the write and then the fence's abort are under
        # way, then the bumped epoch — within a bounded time
        deadline = asyncio.get_running_loop().time() + 10
        while True:
            code, again, bumped = await txn.init_producer_id("app", 10_000, None, new_id)
            if code == 0:
                break
            assert code == 51, code
            assert asyncio.get_running_loop().time() < deadline, f"{txn.transactions['app']} stuck"
            await asyncio.sleep(0.02)
        assert (again, bumped) == (pid, epoch + 2)  # the abort's bump, then the new instance's
        assert [s[0] for s in stored(broker, "app")] == [EMPTY, ONGOING, PREPARE_ABORT, COMPLETE_ABORT, EMPTY]
        assert txn.transactions["app"].pending is None

    run(tmp_path / "d", scenario)
