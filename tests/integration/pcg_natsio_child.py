"""A member of a partitioned consumer group run by natsio-pcgroups (Python 3.13+), for
test_js_pcgroups_interop: ``python pcg_natsio_child.py URL STREAM GROUP MEMBER KIND``
(KIND: ``static`` or ``elastic``).

Prints ``ready`` once consuming, then ``<subject> <data>`` for each message it acked
(with a confirmed ack), and exits when stdin closes or after 60 s.
"""

import asyncio
import sys

import natsio
from natsio.jetstream import AckPolicy, ConsumerConfig
from natsio.pcgroups import PartitionedMsg, elastic_consume, static_consume


async def main(url: str, stream: str, group: str, member: str, kind: str) -> None:
    nc = await natsio.connect(url)
    js = nc.jetstream()

    async def handle(msg: PartitionedMsg) -> None:
        await msg.ack_sync()
        print(msg.subject, msg.data.decode(), flush=True)

    consume = static_consume if kind == "static" else elastic_consume
    ctx = await consume(
        js,
        stream,
        group,
        member,
        handle,
        ConsumerConfig(ack_policy=AckPolicy.EXPLICIT, max_ack_pending=1),
    )
    print("ready", flush=True)
    loop = asyncio.get_running_loop()
    try:
        await asyncio.wait_for(loop.run_in_executor(None, sys.stdin.read), 60)
    except TimeoutError:
        pass
    await ctx.stop()
    await nc.close()


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:6]))
