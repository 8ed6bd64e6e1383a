"""Files in an object store: put a file, list the bucket, get it back into a file, verify.

The object is streamed in 128 KiB chunks both ways, so a file far larger than memory
goes through the same way; every read checks the object's SHA-256 digest. Objects are
stored as nats.go and nats-py store them, so those clients (and ``nats object``) read
them too.

Run against a server:      python examples/object_store_files.py --server nats://127.0.0.1:4222
Run with an embedded one:  python examples/object_store_files.py
"""

from __future__ import annotations

import argparse
import hashlib
import os
import tempfile
import time
from pathlib import Path

import nats_sync
from nats_sync.jetstream import ObjectNotFoundError
from nats_sync.testing import server_url


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--server", help="NATS URL (default: start an embedded JetStream server)")
    parser.add_argument("--mib", type=int, default=8, help="size of the file to store")
    args = parser.parse_args()

    with (
        tempfile.TemporaryDirectory() as folder,
        server_url(args.server, jetstream=True) as url,
        nats_sync.connect(url) as nc,
    ):
        source = Path(folder) / "dataset.bin"
        source.write_bytes(os.urandom(args.mib * 1024 * 1024))
        js = nc.jetstream()
        store = js.create_object_store("files", description="example files")

        started = time.perf_counter()
        with source.open("rb") as f:
            info = store.put("datasets/dataset.bin", f, metadata={"owner": "example"})
        print(
            f"put {info.name}: {info.size:,} bytes in {info.chunks} chunks "
            f"({time.perf_counter() - started:.2f}s), {info.digest}"
        )

        for item in store.list():
            print(f"listed {item.name}: {item.size:,} bytes, modified {item.mtime}")

        target = Path(folder) / "copy.bin"
        with target.open("wb") as f:
            got = store.get_into("datasets/dataset.bin", f)
        same = (
            hashlib.sha256(target.read_bytes()).digest()
            == hashlib.sha256(source.read_bytes()).digest()
        )
        print(f"got {got.size:,} bytes back into a file; identical: {same}")

        store.delete("datasets/dataset.bin")
        try:
            store.get_info("datasets/dataset.bin")
        except ObjectNotFoundError:
            print("deleted: the object is gone")
        js.delete_object_store("files")


if __name__ == "__main__":
    main()
