"""Every example runs (each with its own embedded nats-server)."""

from __future__ import annotations

import importlib.util
import json
import re
import subprocess
import sys
import threading
import urllib.error
import urllib.request
from pathlib import Path
from types import ModuleType

import pytest

from nats_sync.testing import NatsServer

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"

pytestmark = pytest.mark.timeout(60)


def run_example(name: str, *args: str) -> str:
    done = subprocess.run(
        [sys.executable, str(EXAMPLES / name), *args],
        capture_output=True,
        text=True,
        timeout=50,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_pubsub() -> None:
    out = run_example("pubsub.py", "--count", "6")
    assert "received 6 of 6, dropped 0" in out


def test_request_reply() -> None:
    out = run_example("request_reply.py", "--requests", "50")
    assert "pipelined 50 requests: 50 answered" in out
    assert "no responders" in out


def test_reconnect() -> None:
    out = run_example("reconnect.py")
    assert "callback: disconnected" in out and "callback: reconnected" in out
    assert out.count("listener got: sent while down") == 5


def test_jetstream_pipeline() -> None:
    out = run_example("jetstream_pipeline.py", "--orders", "300")
    assert "stored 300 orders (seq 1..300)" in out
    assert "seq 1, duplicate=True" in out
    assert "worker 2 finished: 300 orders billed once each" in out
    assert "replayed 300 orders in order from the start" in out
    assert "read sequences 10..19 directly: 10 messages" in out


def test_object_store_files() -> None:
    out = run_example("object_store_files.py", "--mib", "3")
    assert "put datasets/dataset.bin: 3,145,728 bytes in 24 chunks" in out
    assert "listed datasets/dataset.bin: 3,145,728 bytes" in out
    assert "got 3,145,728 bytes back into a file; identical: True" in out
    assert "deleted: the object is gone" in out


def test_kv_feature_flags() -> None:
    out = run_example("kv_feature_flags.py", "--demo")
    assert "before: <html><body class='light'>" in out
    assert "put dark_mode=on (revision 1)" in out
    assert "after: <html><body class='dark'>" in out
    assert "after delete: <html><body class='light'>" in out


def _load(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name.removesuffix(".py"), EXAMPLES / name)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_wsgi_app_under_concurrent_http_load(
    nats_server: NatsServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    wsgi = _load("wsgi_app.py")
    monkeypatch.setenv("NATS_URL", nats_server.url)
    service = wsgi.start_price_service(nats_server.url)
    httpd = wsgi.make_server("127.0.0.1", 0, wsgi.app, wsgi.ThreadingWSGIServer, wsgi.QuietHandler)
    serving = threading.Thread(target=httpd.serve_forever, daemon=True)
    serving.start()
    base = f"http://127.0.0.1:{httpd.server_port}"
    failures: list[str] = []

    def client(index: int) -> None:
        for n in range(25):
            sku = f"sku-{index}{n}"
            with urllib.request.urlopen(f"{base}/price?sku={sku}", timeout=10) as response:
                answer = json.load(response)
            if answer != {"sku": sku, "price": int(f"{index}{n}") * 1.25}:
                failures.append(f"{sku}: {answer}")

    try:
        threads = [threading.Thread(target=client, args=(i,)) for i in range(1, 9)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(30)
        assert failures == []
        assert not any(thread.is_alive() for thread in threads)
        with pytest.raises(urllib.error.HTTPError) as missing:
            urllib.request.urlopen(f"{base}/nothing", timeout=5)
        assert missing.value.code == 404
        service.drain()
        with pytest.raises(urllib.error.HTTPError) as unavailable:
            urllib.request.urlopen(f"{base}/price?sku=sku-1", timeout=5)
        assert unavailable.value.code == 503
    finally:
        httpd.shutdown()
        httpd.server_close()
        from nats_sync._process import close_process_clients

        close_process_clients()


def test_fast_ingest() -> None:
    out = run_example("fast_ingest.py", "--readings", "5000")
    assert "stored 5,000 readings in one fast batch" in out
    assert "err_code=10071" in out and "the server stored 5 of them, in order" in out
    assert "a second batch stored the other 5: 10 entries in all" in out
    assert "order 17 stored atomically: 3 messages, last at seq 3" in out
    assert "order 18 failed its check: nothing of it stored (3 messages in all)" in out


def test_otel_tracing() -> None:
    pytest.importorskip("opentelemetry.sdk")
    out = run_example("otel_tracing.py")
    assert 'HTTP answer: {"sku": "sku-7", "cents": 1999}' in out
    names = re.findall(r'^    "name": "([^"]+)"', out, re.MULTILINE)
    assert sorted(names) == [
        "GET /price",
        "db.prices process",
        "db.prices request",
        "lookup process",
        "prices.lookup request",
    ]
    assert len(set(re.findall(r'"trace_id": "(0x[0-9a-f]+)"', out))) == 1  # one trace
