"""The tool loop over HTTPS as hosted providers serve it: kept-alive connections and
chunked streams (issue 18; target: one connection per run, and per-round time within
1.2× of the same loop over plain HTTP).

bench/peers.py's loop (``ROUNDS`` tool rounds, ``ROUNDS`` + 1 streamed model calls, the
same bodies and tool for every library, timed as ``peers.loop_seconds`` says), against
a ``ReplayServer`` on loopback in three set-ups, one run of each in turn per round:

* ``plain``: HTTP, keep-alive, ``Transfer-Encoding: chunked``;
* ``tls``: the same over TLS, with a self-signed certificate for 127.0.0.1 that this
  module makes with ``openssl`` (each library trusts it through the standard variables:
  ``REQUESTS_CA_BUNDLE`` for requests, ``SSL_CERT_FILE`` for httpx under the openai SDK);
* ``tls, close``: TLS with the server closing the connection after every reply, so each
  model call pays a TCP and TLS handshake: what one connection per run saves.

``connections`` is the number the server accepted during one run (a new server per
run). The TLS / plain ratio pairs the two runs of each round (median over rounds).
The runs of a library are repeated for at least ``MIN_SECONDS``: a 5 % difference
between runs of 0.15 s is lost in the noise of a few runs on a shared machine.
"""

from __future__ import annotations

import os
import ssl
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

import peers
from common import runs, summary

ROUNDS = 50
TARGET = 1.2
MIN_SECONDS = 10.0  # per library, all set-ups together
SETUPS = {"plain": ("chunked", False), "tls": ("chunked", True), "tls, close": (None, True)}


@contextmanager
def certificate():
    """A self-signed certificate for 127.0.0.1 (``openssl req``, EC P-256, one day),
    trusted by requests and httpx while the block runs; yields a server-side
    ``ssl.SSLContext`` holding it."""
    with tempfile.TemporaryDirectory(prefix="agentflow-bench-tls-") as folder:
        cert, key = Path(folder, "cert.pem"), Path(folder, "key.pem")
        subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                        "ec_paramgen_curve:prime256v1", "-nodes", "-days", "1",
                        "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
                        "-keyout", str(key), "-out", str(cert)],
                       check=True, capture_output=True)
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(cert, key)
        saved = {name: os.environ.get(name) for name in ("REQUESTS_CA_BUNDLE", "SSL_CERT_FILE")}
        os.environ.update(dict.fromkeys(saved, str(cert)))
        try:
            yield context
        finally:
            for name, value in saved.items():
                if value is None:
                    os.environ.pop(name, None)
                else:
                    os.environ[name] = value


def one_run(name: str, keep_alive: str | None, context: ssl.SSLContext | None
            ) -> tuple[float, int]:
    """Seconds of one ``peers.loop_seconds`` run of library ``name`` against a new
    server, and the connections that server accepted; raises ``peers.PeerError``
    when the run or its requests are not the expected loop."""
    from agentflow.testing.replay import ReplayServer
    with ReplayServer(peers.replay_bodies(ROUNDS), keep_alive=keep_alive,
                      ssl_context=context) as server:
        seconds = peers.loop_seconds(name, server.base_url, ROUNDS)
        peers.check_requests(name, server.requests, ROUNDS)
        if server.mismatches:
            raise peers.PeerError(f"{name}: {server.mismatches}")
        return seconds, server.connections


def measure(name: str, context: ssl.SSLContext) -> dict:
    """Every set-up of ``SETUPS`` for library ``name``: one untimed run each (first-use
    costs), then rounds of one run each, in turn: ``runs()`` rounds, and more until
    ``MIN_SECONDS`` have passed (a ratio of fast runs on a busy machine needs many)."""
    contexts = {setup: context if tls else None for setup, (_, tls) in SETUPS.items()}
    for setup, (keep_alive, _) in SETUPS.items():
        one_run(name, keep_alive, contexts[setup])
    seconds = {setup: [] for setup in SETUPS}
    connections = {setup: [] for setup in SETUPS}
    started = time.perf_counter()
    while len(seconds["tls"]) < runs() or time.perf_counter() - started < MIN_SECONDS:
        for setup, (keep_alive, _) in SETUPS.items():
            run_seconds, opened = one_run(name, keep_alive, contexts[setup])
            seconds[setup].append(run_seconds / ROUNDS)
            connections[setup].append(opened)
    return {"name": name, "runs": len(seconds["tls"]),
            "round": {setup: summary(values) for setup, values in seconds.items()},
            "connections": connections,
            "ratio": statistics.median(t / p for t, p in zip(seconds["tls"], seconds["plain"]))}


def main(libraries=peers.LIBRARIES) -> list[dict]:
    results = []
    with certificate() as context:
        for name in libraries:
            try:
                results.append(measure(name, context))
            except Exception as exc:  # a peer that cannot run is reported, not fatal
                results.append({"name": name, "error": f"{type(exc).__name__}: {exc}"})
    return results


def table(results: list[dict]) -> list[str]:
    ms = lambda s: f"{s['median'] * 1e3:.2f} [{s['min'] * 1e3:.2f} – {s['max'] * 1e3:.2f}]"  # noqa: E731
    count = lambda values: (str(min(values)) if min(values) == max(values)  # noqa: E731
                            else f"{min(values)}–{max(values)}")
    lines = ["| library | ms per round, TLS kept alive | connections per run | "
             "ms per round, plain HTTP kept alive | TLS / plain, paired | "
             "ms per round, TLS closed after each call | its connections |",
             "|---|---|---|---|---|---|---|"]
    for r in results:
        if "error" in r:
            lines.append(f"| {r['name']} | not measured: {r['error']} | | | | | |")
            continue
        rounds, opened = r["round"], r["connections"]
        lines.append(f"| {r['name']} ({r['runs']} runs) | {ms(rounds['tls'])} | **{count(opened['tls'])}** | "
                     f"{ms(rounds['plain'])} | **{r['ratio']:.2f}×** | "
                     f"{ms(rounds['tls, close'])} | {count(opened['tls, close'])} |")
    return lines


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    print("\n".join(table(main(sys.argv[1:] or peers.LIBRARIES))))
