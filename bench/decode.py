"""Stream decoding: a large body of real-format chunk events, decoded in memory (no
HTTP), in MB/s. agentflow decodes *and assembles* into updates; the peers decode only
(the openai SDK also accumulates chunks, as its own streaming helper does)."""

from __future__ import annotations

import json

from common import chunks_of, measure, runs, summary, text_body

SIZE = 50 * 1024 * 1024


def floor(body, chunks):
    """Split on blank lines and json.loads each event; no SSE rules, no assembly."""
    loads = json.loads
    for block in body.split(b"\n\n"):
        if block.startswith(b"data: ") and block != b"data: [DONE]":
            loads(block[6:])


def agentflow_updates(body, chunks):
    from agentflow.assembler import stream_updates
    for _ in stream_updates(iter(chunks)):
        pass


def openai_sdk_sse(body, chunks):
    """The SDK's own SSE decoder and json, no chunk objects: decoding alone."""
    from openai._streaming import SSEDecoder
    for sse in SSEDecoder().iter_bytes(iter(chunks)):
        if sse.data.startswith("[DONE]"):
            break
        sse.json()


def openai_sdk_decode(body, chunks):
    """The SDK's own SSE decoder and its chunk objects (no accumulation)."""
    from openai._models import construct_type
    from openai._streaming import SSEDecoder
    from openai.types.chat import ChatCompletionChunk
    for sse in SSEDecoder().iter_bytes(iter(chunks)):
        if sse.data.startswith("[DONE]"):
            break
        construct_type(type_=ChatCompletionChunk, value=sse.json())


def openai_sdk(body, chunks):
    from openai._models import construct_type
    from openai._streaming import SSEDecoder
    from openai.lib.streaming.chat import ChatCompletionStreamState
    from openai.types.chat import ChatCompletionChunk
    state = ChatCompletionStreamState()
    for sse in SSEDecoder().iter_bytes(iter(chunks)):
        if sse.data.startswith("[DONE]"):
            break
        chunk = construct_type(type_=ChatCompletionChunk, value=sse.json())
        state.handle_chunk(chunk)


def httpx_sse(body, chunks):
    import httpx
    from httpx_sse import EventSource
    response = httpx.Response(200, headers={"content-type": "text/event-stream"},
                              content=iter(chunks))
    for event in EventSource(response).iter_sse():
        if event.data != "[DONE]":
            json.loads(event.data)


def sseclient_py(body, chunks):
    import sseclient
    for event in sseclient.SSEClient(iter(chunks)).events():
        if event.data != "[DONE]":
            json.loads(event.data)


DECODERS = {"floor (split + json.loads)": floor, "agentflow (decode + assemble)": agentflow_updates,
            "openai SDK (SSE decoder + json)": openai_sdk_sse,
            "openai SDK (decode into chunk objects)": openai_sdk_decode,
            "httpx-sse (decode)": httpx_sse, "sseclient-py (decode)": sseclient_py,
            "openai SDK (decode + accumulate, 5 MB)": openai_sdk}
# The SDK's accumulator slows down as the text grows (it rebuilds its snapshot per
# chunk), so it gets a 5 MB body; MB/s on 50 MB would be lower still.
SIZES = {"openai SDK (decode + accumulate, 5 MB)": 5 * 1024 * 1024}


def main(only=None) -> dict:
    bodies = {size: text_body(size) for size in {SIZE, *SIZES.values()}}
    results = {}
    for _round in range(runs()):  # interleaved, so drift affects every decoder alike
        for name, decoder in DECODERS.items():
            if only and only not in name:
                continue
            body = bodies[SIZES.get(name, SIZE)]
            chunks = chunks_of(body)
            megabytes = len(body) / 1e6
            try:
                [seconds] = measure(lambda: decoder(body, chunks), runs=1)
            except ImportError as exc:
                results[name] = {"error": f"not installed: {exc.name}"}
                continue
            results.setdefault(name, {"rates": []})["rates"].append(megabytes / seconds)
    for name, data in results.items():
        if "rates" in data:
            data.update(summary(data["rates"]))
    body = bodies[SIZE]
    return {"size_mb": len(body) / 1e6, "events": body.count(b"\n\ndata: ") + 1,
            "results": results}


if __name__ == "__main__":
    import sys
    out = main(sys.argv[1] if len(sys.argv) > 1 else None)
    for name, data in out["results"].items():
        print(f"{name:36} " + (f"{data['median']:7.1f} MB/s  [{data['min']:.1f} – {data['max']:.1f}]"
                              if "median" in data else data["error"]))
