"""Layer 6 (benchmark) runner: ``sglang.bench_serving`` of the deployed release, once per concurrency
level, with the artifacts scrubbed of the API key before anything else reads them.

bench_serving's own command line runs unchanged: its ``__main__`` (argument parser + run_benchmark)
is executed per level with ``runpy.run_module("sglang.bench_serving", run_name="__main__")`` and
that level's ``sys.argv``, all in this one interpreter: the import chain (transformers, SGLang, ...,
40+ s on a busy 2-CPU host) is paid once, not once per level. Each level's console output goes to its
own log file; a level that raises or exits non-zero is recorded as such and the next one runs.

usage: verify_bench.py SPEC_JSON     (run with the release venv's python; prints one JSON document)

SPEC: {"base_url", "levels": [1, 30, ...], "num_prompts": n or {"C": n}, "repetitions": r (>= 1),
       "warmup", "output_len", "input_len",
       "dataset": "coding" | "random" | "random-ids", "prompts": path of the shipped JSONL prompts,
       "model": model path, "tokenizer": tokenizer path, "served_name", "workdir", "logdir",
       "timeout_s", "seed", "trust_remote_code": bool (sglang_trust_remote_code; default false),
       "order": optional [[level, rep(, prompts)], ...]: exactly these runs in this order (the same-window
       pair's seeded random order; a third value is that run's prompts, e.g. the capacity probe)}
Repetitions run in rounds (every level once, then every level again, ...), so a slow drift of the host
spreads over all levels instead of biasing one; each (level, repetition) has its own JSONL and log.
The API key comes as one JSON document ``{"api_key": "<key>" | null}``, from the file the spec's
``key_file`` names (written by the task, mode 0600, owned by the service user, in the 0700 work dir;
read and removed at once, before anything else runs), else on stdin: never on a command line, never in
the environment the task starts this with (Ansible's remote ``sh -c 'VAR=... python ...'`` shows an
``environment:`` in ``ps``) and never in the module arguments of the task (an ``async`` task keeps
those in its job files on the host, which is why the task runs this in the background with the key in
a file). The key is put into ``os.environ["OPENAI_API_KEY"]`` of this process only,
where bench_serving reads it (it sends it as a Bearer token); a process's environment is readable in
/proc/<pid>/environ by its own user and root only, not in ``ps`` or /proc/<pid>/cmdline. Never in
the output: every file bench_serving writes (its JSONL embeds
/get_server_info, which holds the key) and its console log are scrubbed with verify_scrub.py (the
collection's plugins/module_utils/verify_scrub.py, copied beside this file) and checked for leaks.

Progress: with the spec's ``progress`` (a path in the work dir) the runner keeps a small JSON document
there, replaced atomically: ``{"kind": "sglang-deploy-progress", "what": "benchmark", "state":
"starting" | "running" | "done" | "failed", "run": k, "runs": n, "level": C, "level_index": i,
"levels": m, "rep": r, "reps": R, "elapsed_s": s}`` (1-based counts), which the task's poll reads and
the CLI shows ("benchmark: level 3 of 5 (C=30), rep 2 of 3"). It holds no secret and no host text.

Remote code: bench_serving 0.5.9 loads the tokenizer with ``AutoTokenizer.from_pretrained(path,
trust_remote_code=True)`` whatever the server was told; :func:`pin_remote_code` makes every
``from_pretrained`` of transformers' Auto classes use the spec's ``trust_remote_code`` instead, so a
model directory whose ``auto_map`` names code runs none of it unless the operator allowed remote
code (``sglang_trust_remote_code``; preflight refuses such a directory while it is false). The task
runs this as the service user in the service's sandbox (roles/verify/tasks/bench_exec.yml), so
allowed code runs where the server runs it, never as root.

Datasets (no download in any of them):
* coding: the shipped coding prompts as written, in ShareGPT form (``--dataset-name sharegpt
  --dataset-path``), output fixed to output_len tokens (``--sharegpt-output-len``; ignore_eos is
  bench_serving's default);
* random: the same prompts' tokens repeated/truncated to exactly input_len tokens (``--dataset-name
  random`` with the ShareGPT file as ``--dataset-path``, ``--random-range-ratio 1.0``): fixed lengths;
* random-ids: random token ids, input_len / output_len fixed (``--random-range-ratio 1.0``).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import runpy
import signal
import sys
import time
import traceback
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import verify_scrub


def sharegpt_dataset(prompts_file: Path, out: Path, count: int) -> int:
    """The shipped prompts ({"prompt": ...} per line) as a ShareGPT JSON list, cycled to >= count."""
    prompts = []
    for line in prompts_file.read_text(encoding="utf-8").splitlines():
        if line.strip():
            prompts.append(json.loads(line)["prompt"])
    if not prompts:
        raise SystemExit(f"no prompts in {prompts_file}")
    rows = []
    for i in range(max(count, len(prompts))):
        text = prompts[i % len(prompts)]
        rows.append(
            {
                "id": f"coding-{i}",
                "conversations": [
                    {"from": "human", "value": text},
                    {"from": "gpt", "value": "Here is the code."},
                ],
            }
        )
    out.write_text(json.dumps(rows), encoding="utf-8")
    return len(prompts)


def level_prompts(spec: dict[str, Any], level: int) -> int:
    """Prompts of one level: spec num_prompts is one integer or {"C": n}."""
    value = spec["num_prompts"]
    if isinstance(value, dict):
        per: dict[Any, Any] = value
        return int(per.get(str(level), per.get(level)) or 0)
    return int(value)


def bench_argv(spec: dict[str, Any], level: int, dataset_path: Path, output: Path) -> list[str]:
    argv = [
        "sglang.bench_serving",
        "--backend", "sglang",
        "--base-url", spec["base_url"],
        "--model", spec["model"],
        "--tokenizer", spec["tokenizer"],
        "--served-model-name", spec["served_name"],
        "--num-prompts", str(level_prompts(spec, level)),
        "--max-concurrency", str(level),
        "--warmup-requests", str(spec["warmup"]),
        "--output-file", str(output),
        "--seed", str(spec.get("seed", 1)),
        "--disable-tqdm",
    ]  # fmt: skip
    dataset = spec["dataset"]
    if dataset == "coding":
        argv += ["--dataset-name", "sharegpt", "--dataset-path", str(dataset_path)]
        argv += ["--sharegpt-output-len", str(spec["output_len"])]
    else:
        argv += ["--dataset-name", dataset, "--random-range-ratio", "1.0"]
        argv += ["--random-input-len", str(spec["input_len"]), "--random-output-len", str(spec["output_len"])]
        if dataset == "random":
            argv += ["--dataset-path", str(dataset_path)]
    return argv


class LevelTimeout(Exception):
    """A level ran past timeout_s."""


def _alarm(signum: int, frame: object) -> None:
    raise LevelTimeout


def run_level(
    spec: dict[str, Any], level: int, dataset_path: Path, logdir: Path, key: str, *, rep: int = 0
) -> dict[str, Any]:
    suffix = f"-r{rep + 1}" if int(spec.get("repetitions", 1)) > 1 else ""
    output = logdir / f"bench-c{level}{suffix}.jsonl"
    log = logdir / f"bench-c{level}{suffix}.log"
    output.unlink(missing_ok=True)
    argv = bench_argv(spec, level, dataset_path, output)
    console = io.StringIO()
    rc = 0
    started = time.monotonic()
    saved_argv, saved_cwd = sys.argv, os.getcwd()
    signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(int(spec["timeout_s"]))
    try:
        sys.argv = list(argv)
        os.chdir(spec["workdir"])
        with contextlib.redirect_stdout(console), contextlib.redirect_stderr(console):
            runpy.run_module("sglang.bench_serving", run_name="__main__", alter_sys=False)
    except SystemExit as exc:
        rc = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except LevelTimeout:
        rc = 124
        console.write(f"\nverify: level {level} timed out after {spec['timeout_s']} s\n")
    except BaseException:  # a level that raises is recorded; the next level runs
        rc = 1
        console.write(traceback.format_exc())
    finally:
        signal.alarm(0)
        sys.argv = saved_argv
        os.chdir(saved_cwd)
    seconds = round(time.monotonic() - started, 1)
    out = verify_scrub.scrub_text(console.getvalue(), key)
    log.write_text(out, encoding="utf-8")
    result = None
    if output.exists():
        scrubbed = verify_scrub.scrub_jsonl(output.read_text(encoding="utf-8"), key)
        output.write_text(scrubbed, encoding="utf-8")
        lines = [ln for ln in scrubbed.splitlines() if ln.strip()]
        if lines:
            result = json.loads(lines[-1])
            result.pop("server_info", None)  # kept in the JSONL file; the summary stays small
    return {
        "level": level,
        "rep": rep,
        "num_prompts": level_prompts(spec, level),
        "rc": rc,
        "seconds": seconds,
        "result": result,
        "jsonl": str(output) if output.exists() else None,
        "log": str(log),
        "argv": argv[1:],
        "tail": out.strip().splitlines()[-12:] if rc != 0 or result is None else [],
    }


def pin_remote_code(allowed: bool) -> list[str]:
    """Make ``from_pretrained`` of transformers' Auto classes take ``trust_remote_code=allowed``,
    whatever the caller passes (bench_serving passes True). Returns the classes pinned."""
    import transformers  # noqa: PLC0415 - the release's, imported where bench_serving would import it

    pinned = []
    autos = ("AutoTokenizer", "AutoProcessor", "AutoConfig", "AutoImageProcessor", "AutoFeatureExtractor")
    for name in autos:
        cls = getattr(transformers, name, None)
        if cls is None:
            continue
        original = cls.from_pretrained

        def from_pretrained(*args: Any, _original: Any = original, **kwargs: Any) -> Any:
            kwargs["trust_remote_code"] = allowed
            return _original(*args, **kwargs)

        cls.from_pretrained = staticmethod(from_pretrained)
        pinned.append(name)
    return pinned


def read_key(stream: Any, key_file: str | None = None) -> str:
    """The API key from the JSON document ({"api_key": key or null}) in ``key_file`` (removed at once,
    whatever it holds), else on ``stream`` (stdin); "" when there is none."""
    if key_file:
        path = Path(key_file)
        try:
            text = path.read_text(encoding="utf-8").strip()
        finally:
            path.unlink(missing_ok=True)
    elif stream is None or stream.isatty():
        return ""
    else:
        text = stream.read().strip()
    if not text:
        return ""
    key = json.loads(text).get("api_key")
    return key if isinstance(key, str) else ""


class Progress:
    """The progress document (see the module's doc): written atomically, at most once per run."""

    def __init__(self, path: str | None, runs: list[list[int]], levels: list[int]) -> None:
        self.path = Path(path) if path else None
        self.runs = runs
        self.levels = levels
        self.started = time.monotonic()

    def write(self, state: str, index: int | None = None) -> None:
        if self.path is None:
            return
        doc: dict[str, Any] = {
            "kind": "sglang-deploy-progress",
            "what": "benchmark",
            "state": state,
            "runs": len(self.runs),
            "levels": len(self.levels),
            "reps": max((int(item[1]) for item in self.runs), default=0) + 1,
            "elapsed_s": round(time.monotonic() - self.started, 1),
        }
        if index is not None:
            level, rep = int(self.runs[index][0]), int(self.runs[index][1])
            doc.update(run=index + 1, level=level, rep=rep + 1)
            if level in self.levels:
                doc["level_index"] = self.levels.index(level) + 1
        tmp = self.path.with_name(f".{self.path.name}.tmp")
        tmp.write_text(json.dumps(doc), encoding="utf-8")
        tmp.replace(self.path)


def main() -> int:
    spec: dict[str, Any] = json.loads(sys.argv[1])
    key = read_key(sys.stdin, spec.get("key_file"))
    repetitions = max(1, int(spec.get("repetitions", 1)))
    order = spec.get("order") or [[int(lv), rep] for rep in range(repetitions) for lv in spec["levels"]]
    runs = [(dict(spec, num_prompts=int(item[2])) if len(item) > 2 else spec, item) for item in order]
    progress = Progress(spec.get("progress"), [list(item) for _run_spec, item in runs], list(spec["levels"]))
    progress.write("running")  # before the imports below (transformers: tens of seconds on a busy host)
    if key:
        os.environ["OPENAI_API_KEY"] = key
    else:
        os.environ.pop("OPENAI_API_KEY", None)
    # No hub access: the tokenizer is a local path (bench_serving would otherwise try the hub).
    os.environ.update({"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "PYTHONUNBUFFERED": "1"})
    pin_remote_code(spec.get("trust_remote_code") is True)
    workdir = Path(spec["workdir"])
    logdir = Path(spec["logdir"])
    logdir.mkdir(parents=True, exist_ok=True)
    dataset_path = workdir / "coding-sharegpt.json"
    most = max(level_prompts(run_spec, int(item[0])) for run_spec, item in runs)
    n_prompts = sharegpt_dataset(Path(spec["prompts"]), dataset_path, most)
    levels = []
    for index, (run_spec, item) in enumerate(runs):
        progress.write("running", index)
        levels.append(run_level(run_spec, int(item[0]), dataset_path, logdir, key, rep=int(item[1])))
    leaks = []
    for path in sorted(logdir.iterdir()):
        if path.is_file() and verify_scrub.find_leaks(
            path.read_text(encoding="utf-8", errors="replace"), key
        ):
            leaks.append(str(path))
    print(
        json.dumps(
            {
                "levels": levels,
                "dataset": spec["dataset"],
                "shipped_prompts": n_prompts,
                "logdir": str(logdir),
                "leaks": leaks,
                "repetitions": repetitions,
                "auth": bool(key),
            }
        )
    )
    progress.write("done")
    return 0


def failed(spec_json: str) -> None:
    """The progress document says ``failed`` when main() raised (the task's poll stops on it)."""
    try:
        spec = json.loads(spec_json)
        Progress(spec.get("progress"), [], []).write("failed")
    except (OSError, ValueError, TypeError, AttributeError):
        pass


if __name__ == "__main__":
    try:
        code = main()
    except BaseException:
        failed(sys.argv[1] if len(sys.argv) > 1 else "{}")
        raise
    sys.stdout.flush()
    sys.stderr.flush()
    # Skip the interpreter's teardown: after bench_serving ran in this process (runpy), finalizing its
    # modules (SGLang, torch, tokenizers) kept the CPU busy for ~2 min on the 2-core lab machine after
    # the result was printed and every artifact written and closed.
    os._exit(code)
