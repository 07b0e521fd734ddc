"""sglang-protocol-double: a TEST DOUBLE of SGLang's HTTP server, for hosts without a GPU.

It stands in for ``python -m sglang.launch_server`` behind the real ``sglang-kimi`` unit (the test
hook ``sglang_service_exec_override: [<release python>, <this file>, --double-...]``; the role puts
its launcher sglang_launch.py between the interpreter and this file; the launch spec's server flags
follow) and runs with the RELEASE venv's python, so it speaks SGLang's own
contract rather than a copy of it:

* the server flags are parsed by SGLang's own parser (``ServerArgs.add_cli_args``; flags it does not
  know are ignored), after SGLang's own ``--config FILE.yaml`` merge (``ConfigArgumentMerger``, as
  ``prepare_server_args`` does: the API key arrives that way, from the unit's credentials directory);
  at start it prints ``server_args=ServerArgs(...)`` with SGLang's own dataclass repr, the line SGLang
  0.5.9 logs (``entrypoints/engine.py``: ``logger.info(f"{server_args=}")``), so what the unit's
  launcher (sglang_launch.py) does to that line is what reaches the journal; ``/get_server_info``
  returns every ``ServerArgs`` field (``api_key``
  included, in clear, as the real server does), the scheduler limits, ``internal_states`` (with
  ``avg_spec_accept_length`` for a speculative preset: bench_serving reads the accept length there)
  and SGLang's version;
* request bodies are validated by SGLang's own models: ``/generate`` takes
  ``sglang.srt.managers.io_struct.GenerateReqInput`` exactly as ``http_server.generate_request`` does
  (FastAPI validates the dataclass, then ``normalize_batch_and_arguments()``), ``/v1/completions``
  takes ``sglang.srt.entrypoints.openai.protocol.CompletionRequest``;
* response bodies are built with SGLang's models: ``ModelList``/``ModelCard`` (``/v1/models``),
  ``CompletionResponse``/``CompletionStreamResponse``/``UsageInfo`` (``/v1/completions``); the
  ``/generate`` stream is SGLang's SSE form (``data: {text (cumulative), output_ids, meta_info:
  {id, finish_reason, prompt_tokens, completion_tokens, cached_tokens, spec_verify_ct, ...}}`` then
  ``data: [DONE]``);
* the API key is enforced by SGLang's own middleware (``sglang.srt.utils.auth.add_api_key_middleware``):
  401 without ``Authorization: Bearer <key>``; ``/health*`` stays open.

Generation is simulated: tokens (ids of the served tokenizer at ``--model-path``, decoded with it)
stream at ``--double-tokens-per-s`` per request after ``--double-ttft-ms`` (each step due at a deadline
from the first token, so a busy host CPU does not slow the pace); with a speculative
algorithm each step emits ``--double-accept-length`` tokens (alternating floor/ceil to reach a
fractional mean). A RELEASE can carry ``<release>/protocol-double.json`` (``{"tokens_per_s": 5}``):
it overrides the rate (and ``accept_length``, ``ttft_ms``, ``spec_step_factor``: see below), so "this
release is slow" is a property of the release a rollback leaves. The
rate is read from that file at every request (the file of the release this process runs from, fixed
at start): a test makes the running release slow without restarting the double. The environment
variable ``SGLANG_DOUBLE_PACE`` (a factor, default 1, read at start) scales the rate: set in the NCCL
env file, an environment-only change makes the server slower. Every request's method and path are
appended to ``double-requests.log`` in the working directory (the unit's state directory), so a test
can tell which requests a run sent (e.g. none that generates in check mode).

With ``--enable-metrics`` (SGLang's flag, as the real server) ``/metrics`` serves Prometheus text with
SGLang 0.5.9's scheduler gauges ``sglang:num_running_reqs``, ``sglang:num_queue_reqs``,
``sglang:gen_throughput`` and ``sglang:spec_accept_length`` (the same names, documentation strings and
labels as ``sglang/srt/metrics/collector.py``, through
``prometheus_client`` of the release venv): the requests generating now, and 0 queued (the double
queues nothing). The rolling upgrade's drain reads them; without the flag ``/metrics`` is a 404, as on
SGLang.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import dataclasses
import json
import math
import os
import random
import sys
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any


def _stub_sgl_kernel_without_gpu() -> None:
    """Without a GPU, sgl_kernel cannot load its CUDA library (libcuda.so.1), and SGLang's io_struct
    imports it through schedule_batch -> mem_cache. Only then, sgl_kernel (and nothing else) is
    replaced by inert stub modules so SGLang's pure-Python protocol modules import; no kernel runs
    in the double. On a GPU host the real sgl_kernel is imported."""
    import importlib.abc  # noqa: PLC0415
    import importlib.machinery  # noqa: PLC0415
    import types  # noqa: PLC0415

    try:
        import sgl_kernel  # type: ignore[import-not-found]  # noqa: F401, PLC0415
    except ImportError:
        pass
    else:
        return

    class _Inert:
        """Any attribute, call or item of it is another inert object (module-level uses only)."""

        def __init__(self, name: str) -> None:
            self._name = name

        def __getattr__(self, name: str) -> Any:
            if name.startswith("__"):
                raise AttributeError(name)
            return _Inert(f"{self._name}.{name}")

        def __call__(self, *_a: Any, **_k: Any) -> Any:
            return _Inert(f"{self._name}()")

        def __getitem__(self, _key: Any) -> Any:
            return _Inert(f"{self._name}[]")

        def __iter__(self) -> Any:
            return iter(())

        def __bool__(self) -> bool:
            return False

    class _Stub(types.ModuleType):
        def __getattr__(self, name: str) -> Any:
            if name.startswith("__"):
                raise AttributeError(name)
            return _Inert(f"{self.__name__}.{name}")

    class _Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
        def find_spec(self, fullname: str, path: Any, target: Any = None) -> Any:
            if fullname == "sgl_kernel" or fullname.startswith("sgl_kernel."):
                return importlib.machinery.ModuleSpec(fullname, self, is_package=True)
            return None

        def create_module(self, spec: Any) -> Any:
            module = _Stub(spec.name)
            module.__path__ = []
            return module

        def exec_module(self, module: Any) -> None:
            return None

    for name in [n for n in sys.modules if n == "sgl_kernel" or n.startswith("sgl_kernel.")]:
        del sys.modules[name]
    sys.meta_path.insert(0, _Finder())


_stub_sgl_kernel_without_gpu()

import uvicorn  # type: ignore[import-not-found]  # noqa: E402
from fastapi import FastAPI, Request  # type: ignore[import-not-found]  # noqa: E402
from fastapi.responses import JSONResponse, Response, StreamingResponse  # type: ignore[import-not-found]  # noqa: E402
from sglang.srt.entrypoints.openai.protocol import (  # type: ignore[import-not-found]  # noqa: E402
    CompletionRequest,
    CompletionResponse,
    CompletionResponseChoice,
    CompletionResponseStreamChoice,
    CompletionStreamResponse,
    ModelCard,
    ModelList,
    UsageInfo,
)
from sglang.srt.managers.io_struct import GenerateReqInput  # type: ignore[import-not-found]  # noqa: E402
from sglang.srt.server_args import ServerArgs  # type: ignore[import-not-found]  # noqa: E402
from sglang.srt.server_args_config_parser import ConfigArgumentMerger  # type: ignore[import-not-found]  # noqa: E402
from sglang.srt.utils.auth import add_api_key_middleware  # type: ignore[import-not-found]  # noqa: E402
from sglang.version import __version__ as SGLANG_VERSION  # type: ignore[import-not-found]  # noqa: E402

CONTEXT_LEN = 32768


def parse(argv: list[str]) -> tuple[argparse.Namespace, argparse.Namespace, list[str]]:
    own = argparse.ArgumentParser(add_help=False)
    own.add_argument(
        "--double-tokens-per-s", type=float, default=float(os.environ.get("SGLANG_DOUBLE_TPS", "200"))
    )
    own.add_argument("--double-ttft-ms", type=float, default=20.0)
    own.add_argument("--double-accept-length", type=float, default=2.0)
    own.add_argument("--double-unhealthy", action="store_true")
    mine, rest = own.parse_known_args(argv)
    parser = argparse.ArgumentParser(prog="sglang.launch_server")
    ServerArgs.add_cli_args(parser)
    if "--config" in rest:  # as prepare_server_args does
        rest = ConfigArgumentMerger(parser).merge_config_with_args(rest)
    server, unknown = parser.parse_known_args(rest)
    return mine, server, unknown


def server_args_object(namespace: argparse.Namespace) -> Any:
    """A ServerArgs holding the parsed values, without __post_init__ (it demands an accelerator): its
    repr is SGLang's own (the dataclass's, or whatever the launcher made of it)."""
    obj = object.__new__(ServerArgs)
    for field in dataclasses.fields(ServerArgs):
        setattr(obj, field.name, getattr(namespace, field.name, None))
    return obj


def release_config() -> dict[str, Any]:
    """<release>/protocol-double.json of the release whose venv runs this double (if any)."""
    release = Path(os.path.realpath(sys.prefix)).parent
    path = release / "protocol-double.json"
    if path.is_file():
        data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
        return data
    return {}


MINE, SERVER, UNKNOWN = parse(sys.argv[1:])
RELEASE = release_config()
TPS = float(RELEASE.get("tokens_per_s", MINE.double_tokens_per_s))


def jitter(config: dict[str, Any]) -> float:
    """Run-to-run jitter (a test knob): protocol-double.json's ``jitter_cv`` (e.g. 0.03) multiplies the
    pace by 1 + jitter_cv * z, z standard normal drawn once per ``jitter_period_s`` window (default 5 s),
    so one benchmark run sees one draw and repeated runs spread by about that CV. 0 / absent: none."""
    cv = float(config.get("jitter_cv", 0.0) or 0.0)
    if cv <= 0:
        return 1.0
    window = int(time.time() // max(float(config.get("jitter_period_s", 5.0)), 0.1))
    return max(0.05, 1.0 + cv * random.Random(window).gauss(0.0, 1.0))


# The HOST's pace (a test knob): /etc/sglang-protocol-double/host.json ``{"pace": 0.9}``, read at every
# request, scales the rate of whichever release runs, as a change of the host's capacity (a neighbour on
# the machine, clocks, thermals) slows every release alike: the same-window verdict's e2e drops it for
# both arms. Absent: 1.
HOST_PACE_FILE = Path("/etc/sglang-protocol-double/host.json")


def host_pace() -> float:
    try:
        data = json.loads(HOST_PACE_FILE.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return 1.0
    pace = data.get("pace", 1.0) if isinstance(data, dict) else 1.0
    return float(pace) if isinstance(pace, int | float) and pace > 0 else 1.0


def tokens_per_s() -> float:
    """The rate now: <release>/protocol-double.json's tokens_per_s when the file is there, else the flag
    (times its jitter factor), times SGLANG_DOUBLE_PACE and the host's pace."""
    try:
        config = release_config()
        return (
            float(config.get("tokens_per_s", MINE.double_tokens_per_s)) * jitter(config) * PACE * host_pace()
        )
    except (OSError, ValueError):  # a file being rewritten: the rate at start
        return TPS * PACE * host_pace()


PACE = float(os.environ.get("SGLANG_DOUBLE_PACE", "1") or 1)
REQUEST_LOG = Path("double-requests.log")


TTFT = float(RELEASE.get("ttft_ms", MINE.double_ttft_ms)) / 1000.0
SPECULATIVE = bool(getattr(SERVER, "speculative_algorithm", None))
ACCEPT = float(RELEASE.get("accept_length", MINE.double_accept_length)) if SPECULATIVE else 1.0
# Drafting has a cost: with a speculative algorithm each step takes this factor longer (the release's
# protocol-double.json "spec_step_factor", default 1.0). Above 1 the drafter no longer pays off and the
# speculative presets run slower than baseline (the seed's drafter-drift risk, for autotune's tests).
SPEC_FACTOR = float(RELEASE.get("spec_step_factor", 1.0)) if SPECULATIVE else 1.0
SERVED = SERVER.served_model_name or SERVER.model_path
STATS = {"steps": 0, "tokens": 0}

try:
    from transformers import AutoTokenizer  # type: ignore[import-not-found]

    TOKENIZER: Any = AutoTokenizer.from_pretrained(SERVER.tokenizer_path or SERVER.model_path)
except Exception as exc:  # a model path without a tokenizer: count words instead
    print(f"sglang-protocol-double: no tokenizer at {SERVER.model_path}: {type(exc).__name__}", flush=True)
    TOKENIZER = None


def count_tokens(prompt: Any) -> int:
    if isinstance(prompt, list):
        return len(prompt)
    if TOKENIZER is not None:
        return len(TOKENIZER.encode(str(prompt)))
    return len(str(prompt).split())


def output_ids(n: int) -> list[int]:
    vocab = int(getattr(TOKENIZER, "vocab_size", 0) or 1000)
    first = 2 if vocab > 4 else 0
    return [first + (i * 7) % max(vocab - first, 1) for i in range(n)]


def decode(ids: list[int]) -> str:
    if TOKENIZER is not None:
        text: str = TOKENIZER.decode(ids, skip_special_tokens=True)
        return text if text.strip() else " ".join(f"t{i}" for i in ids)
    return " ".join(f"t{i}" for i in ids)


def step_sizes(total: int) -> list[int]:
    """Tokens per step: 1 without speculation, else floor/ceil of ACCEPT alternating to its mean."""
    sizes: list[int] = []
    emitted = 0.0
    while sum(sizes) < total:
        emitted += ACCEPT
        size = max(1, min(total - sum(sizes), math.floor(emitted) - sum(sizes)))
        sizes.append(size)
    return sizes


async def simulate(prompt: Any, max_new_tokens: int) -> AsyncIterator[tuple[list[int], int, bool]]:
    """Yield (ids so far, verify steps, finished) at the configured pace."""
    RUNNING["n"] += 1
    try:
        await asyncio.sleep(TTFT)
        rate = tokens_per_s()
        ids_all = output_ids(max_new_tokens)
        done = 0
        # Each step is due at a deadline from the first token (a GPU's pace does not depend on the host's
        # CPU load): a late wake-up on a loaded machine is caught up by the next steps instead of adding
        # up. Relative sleeps lost 5 % of the pace at C=4 with the CPUs busy, so a baseline recorded
        # while the machine was quieter failed the gate (bench/results/2026-12-02-double-pace.txt).
        start = time.monotonic()
        due = 0.0
        for steps, size in enumerate(step_sizes(max_new_tokens), start=1):
            if steps > 1:
                due += size / rate * SPEC_FACTOR
                await asyncio.sleep(max(0.0, start + due - time.monotonic()))
            done += size
            STATS["steps"] += 1
            STATS["tokens"] += size
            EMITTED.append((time.monotonic(), size))
            yield ids_all[:done], steps, done >= max_new_tokens
    finally:
        RUNNING["n"] -= 1


def meta(
    rid: str, prompt_tokens: int, ids: list[int], *, steps: int, finished: bool, started: float
) -> dict[str, Any]:
    info: dict[str, Any] = {
        "id": rid,
        "finish_reason": {"type": "length", "length": len(ids)} if finished else None,
        "prompt_tokens": prompt_tokens,
        "weight_version": "default",
        "total_retractions": 0,
        "completion_tokens": len(ids),
        "cached_tokens": 0,
    }
    if SPECULATIVE:
        info["spec_verify_ct"] = steps
        info["spec_accept_length"] = len(ids) / steps if steps else 0.0
    if finished:
        info["e2e_latency"] = time.time() - started
    return info


RUNNING = {"n": 0}  # requests being generated now (for /metrics)
EMITTED: collections.deque[tuple[float, int]] = collections.deque(maxlen=100000)  # (when, tokens)


def prometheus_metrics() -> bytes:
    """/metrics as SGLang 0.5.9 serves it with --enable-metrics (prometheus_client's text format, the
    names and labels of sglang/srt/metrics/collector.py SchedulerMetricsCollector and
    scheduler_metrics_mixin.py): sglang:num_running_reqs, sglang:num_queue_reqs (always 0 here: the
    double queues nothing), sglang:gen_throughput (tokens of the last 5 s per second) and, with a
    speculative algorithm, sglang:spec_accept_length (tokens per verify step so far)."""
    from prometheus_client import (  # type: ignore[import-not-found]  # noqa: PLC0415
        CollectorRegistry,
        Gauge,
        generate_latest,
    )

    labels = {
        "model_name": SERVED,
        "engine_type": "unified",
        "tp_rank": "0",
        "pp_rank": "0",
        "moe_ep_rank": "0",
    }
    registry = CollectorRegistry()
    now = time.monotonic()
    recent = sum(size for when, size in EMITTED if now - when <= 5.0)
    values = {
        "sglang:num_running_reqs": ("The number of running requests.", float(RUNNING["n"])),
        "sglang:num_queue_reqs": ("The number of requests in the waiting queue.", 0.0),
        "sglang:gen_throughput": ("The generation throughput (token/s).", recent / 5.0),
    }
    if SPECULATIVE:
        accept = STATS["tokens"] / STATS["steps"] if STATS["steps"] else 0.0
        values["sglang:spec_accept_length"] = (
            "The average acceptance length of speculative decoding.",
            accept,
        )
    for name, (doc, value) in values.items():
        Gauge(name, doc, labelnames=list(labels), registry=registry).labels(**labels).set(value)
    data: bytes = generate_latest(registry)
    return data


app = FastAPI()
add_api_key_middleware(app, api_key=SERVER.api_key, admin_api_key=getattr(SERVER, "admin_api_key", None))


@app.middleware("http")
async def log_request(request: Request, call_next: Any) -> Response:
    """Append "METHOD PATH" of every request (authorized or not) to double-requests.log."""
    with REQUEST_LOG.open("a", encoding="utf-8") as fh:
        fh.write(f"{request.method} {request.url.path}\n")
    response: Response = await call_next(request)
    return response


@app.get("/health")
@app.get("/health_generate")
async def health() -> Response:
    return Response(status_code=503 if MINE.double_unhealthy else 200)


if getattr(SERVER, "enable_metrics", False):  # as http_server.py mounts /metrics only with --enable-metrics

    @app.get("/metrics")
    async def metrics() -> Response:
        return Response(content=prometheus_metrics(), media_type="text/plain; version=0.0.4; charset=utf-8")


@app.get("/get_model_info")
@app.get("/model_info")
async def model_info() -> dict[str, Any]:
    return {
        "model_path": SERVER.model_path,
        "tokenizer_path": SERVER.tokenizer_path or SERVER.model_path,
        "is_generation": True,
        "preferred_sampling_params": None,
        "weight_version": "default",
        "has_image_understanding": False,
        "has_audio_understanding": False,
        "model_type": "sglang-protocol-double",
        "architectures": ["SGLangProtocolDouble"],
    }


@app.get("/get_server_info")
@app.get("/server_info")
async def server_info() -> Response:
    args = {f.name: getattr(SERVER, f.name, None) for f in dataclasses.fields(ServerArgs)}
    accept = (STATS["tokens"] / STATS["steps"]) if SPECULATIVE and STATS["steps"] else None
    body = {
        **args,
        "max_total_num_tokens": CONTEXT_LEN * 16,
        "max_req_input_len": CONTEXT_LEN - 8,
        "internal_states": [{"avg_spec_accept_length": accept, "last_gen_throughput": tokens_per_s()}],
        "version": SGLANG_VERSION,
        "test_double": {
            "name": "sglang-protocol-double",
            "tokens_per_s": tokens_per_s(),
            "accept_length": ACCEPT,
        },
    }
    return Response(content=json.dumps(body, default=str), media_type="application/json")


@app.get("/v1/models")
async def models() -> dict[str, Any]:
    listing = ModelList(data=[ModelCard(id=SERVED, root=SERVED, max_model_len=CONTEXT_LEN)])
    out: dict[str, Any] = listing.model_dump()
    return out


@app.api_route("/generate", methods=["POST", "PUT"])
async def generate(obj: GenerateReqInput, request: Request) -> Response:
    try:
        obj.normalize_batch_and_arguments()
    except ValueError as exc:
        return JSONResponse({"error": {"message": str(exc)}}, status_code=400)
    if not obj.is_single:
        return JSONResponse({"error": {"message": "the test double serves single requests"}}, status_code=400)
    params = obj.sampling_params or {}
    max_new = int(params.get("max_new_tokens") or 128)
    prompt = obj.text if obj.text is not None else obj.input_ids
    prompt_tokens = count_tokens(prompt)
    rid = obj.rid or uuid.uuid4().hex
    started = time.time()

    def out(ids: list[int], steps: int, finished: bool) -> dict[str, Any]:
        return {
            "text": decode(ids),
            "output_ids": ids[-1:] if obj.stream else ids,
            "meta_info": meta(rid, prompt_tokens, ids, steps=steps, finished=finished, started=started),
        }

    if obj.stream:

        async def events() -> AsyncIterator[bytes]:
            async for ids, steps, finished in simulate(prompt, max_new):
                yield b"data: " + json.dumps(out(ids, steps, finished)).encode() + b"\n\n"
            yield b"data: [DONE]\n\n"

        return StreamingResponse(events(), media_type="text/event-stream")
    last: dict[str, Any] = {}
    async for ids, steps, finished in simulate(prompt, max_new):
        last = out(ids, steps, finished)
    return JSONResponse(last)


@app.post("/v1/completions")
async def completions(req: CompletionRequest) -> Response:
    prompt_tokens = count_tokens(req.prompt)
    rid = "cmpl-" + uuid.uuid4().hex
    if req.stream:

        async def events() -> AsyncIterator[bytes]:
            sent = ""
            async for ids, _steps, finished in simulate(req.prompt, req.max_tokens):
                text = decode(ids)
                chunk = CompletionStreamResponse(
                    id=rid,
                    model=req.model,
                    choices=[
                        CompletionResponseStreamChoice(
                            index=0, text=text[len(sent) :], finish_reason="length" if finished else None
                        )
                    ],
                )
                sent = text
                yield b"data: " + chunk.model_dump_json().encode() + b"\n\n"
            yield b"data: [DONE]\n\n"

        return StreamingResponse(events(), media_type="text/event-stream")
    ids: list[int] = []
    async for so_far, _steps, _finished in simulate(req.prompt, req.max_tokens):
        ids = so_far
    body = CompletionResponse(
        id=rid,
        model=req.model,
        choices=[CompletionResponseChoice(index=0, text=decode(ids), finish_reason="length")],
        usage=UsageInfo(
            prompt_tokens=prompt_tokens, completion_tokens=len(ids), total_tokens=prompt_tokens + len(ids)
        ),
    )
    return Response(content=body.model_dump_json(), media_type="application/json")


if __name__ == "__main__":
    server_args = server_args_object(SERVER)
    print(f"{server_args=}", flush=True)  # SGLang 0.5.9's start-up line (engine.py)
    print(
        f"sglang-protocol-double: SGLang {SGLANG_VERSION} protocol, {SERVED!r} "
        f"on {SERVER.host}:{SERVER.port}, "
        f"{TPS:g} tok/s per request, ttft {TTFT * 1000:g} ms, accept length {ACCEPT:g}, "
        f"auth {'on' if SERVER.api_key else 'off'}, ignored flags {UNKNOWN}",
        flush=True,
    )
    uvicorn.run(app, host=SERVER.host, port=SERVER.port, log_level="warning")
