"""One side of test_kv_codec_interop, run by natsio-kvcodec (Python 3.13+):
``python kv_codec_natsio_child.py URL REQUEST_JSON``.

The request names a bucket, its codecs (``"base64"``, ``"path"``, ``"zlib"``, joined
by ``+`` for a chain, ``""`` for none), values to ``put`` (``{key: hex}``), keys to
``get``, whether to list ``keys`` and a wildcard ``watch`` filter; the answer, printed
as one JSON line, has ``got`` (``{key: hex}``), ``keys`` and ``watched`` (the keys the
watch gave before its end of initial values).
"""

import asyncio
import json
import sys

import natsio
from natsio import kvcodec

KEY_CODECS = {"base64": kvcodec.Base64KeyCodec, "path": kvcodec.PathKeyCodec}
VALUE_CODECS = {"base64": kvcodec.Base64ValueCodec, "zlib": kvcodec.ZlibValueCodec}


def codec(spec, kinds, chain):
    parts = [kinds[name]() for name in spec.split("+") if name]
    if not parts:
        return None
    return parts[0] if len(parts) == 1 else chain(*parts)


async def main(url, request):
    nc = await natsio.connect(url)
    kv = await nc.jetstream().key_value(
        request["bucket"],
        key_codec=codec(request.get("key_codec", ""), KEY_CODECS, kvcodec.ChainKeyCodec),
        value_codec=codec(request.get("value_codec", ""), VALUE_CODECS, kvcodec.ChainValueCodec),
    )
    for key, value in request.get("put", {}).items():
        await kv.put(key, bytes.fromhex(value))
    answer = {"got": {}, "keys": None, "watched": None}
    for key in request.get("get", []):
        answer["got"][key] = (await kv.get(key)).value.hex()
    if request.get("keys"):
        answer["keys"] = sorted(await kv.keys())
    if request.get("watch"):
        watched = []
        async with kv.watch(request["watch"]) as watcher:
            async for entry in watcher:
                if entry is None:
                    break
                watched.append(entry.key)
        answer["watched"] = sorted(watched)
    await nc.close()
    print(json.dumps(answer), flush=True)


if __name__ == "__main__":
    asyncio.run(asyncio.wait_for(main(sys.argv[1], json.loads(sys.argv[2])), 60))
