"""On the converged lab host (session fixture `converged_lab`):

* `--check` writes nothing: sizes, modes, owners, mtimes and checksums of every path the roles touch,
  and apt's lists, are identical before and after `sglang-deploy up --check`;
* every tag a role README documents runs alone (rc 0, changed 0);
* one launch spec: for each preset, the argv SGLang's parser accepted in the release
  (`<release>/launch-check.json`) equals the unit's ExecStart argv, parsed the way systemd parses it
  and cross-checked with `systemctl show`'s argv[].
"""

from __future__ import annotations

import json
import re
from concurrent.futures import ThreadPoolExecutor

import pytest
from e2e_lab import LAB_HOST, REPO, cli, lab_exec, playbook, snapshot, summary

pytestmark = pytest.mark.e2e

UNIT = "/etc/systemd/system/sglang-kimi.service"


def test_check_mode_writes_nothing_on_the_converged_host(converged_lab: dict[str, object]) -> None:
    before = snapshot()
    assert "/opt/sglang/current" in before
    assert "/var/lib/apt/lists" in before
    checked = cli("up", "--check")
    assert checked.returncode == 0, checked.stdout[-4000:]
    assert summary()["hosts"][LAB_HOST]["changed"] == 0
    after = snapshot()
    assert after == before, "\n".join(line for line in set(after.splitlines()) ^ set(before.splitlines()))[
        :4000
    ]


def documented_tags() -> list[str]:
    """Backticked tags of the `## Tags` section of every role site.yml runs. The stage tags (whole
    stages: preflight, cuda, stack, service) run alone elsewhere: `--tags stack,service` below, the
    bad-input run, `--tags cuda` on the GPU hosts (bench/device)."""
    tags: list[str] = []
    for role in ("preflight", "cuda_toolkit", "sglang_stack", "nccl_env", "sglang_service"):
        text = (REPO / "roles" / role / "README.md").read_text()
        section = text.split("\n## Tags\n", 1)[1].split("\n## ", 1)[0]
        tags += [
            t
            for t in re.findall(r"`([a-z][a-z0-9_]*)`", section)
            if t not in ("always", "preflight", "cuda", "stack", "service")
        ]
    return sorted(set(tags))


def test_every_documented_tag_runs_alone(converged_lab: dict[str, object]) -> None:
    tags = documented_tags()
    assert {"stack_export", "sglang_service_run", "preflight_roles", "cuda_toolkit_verify"} <= set(tags)

    def run(tag: str) -> tuple[str, int, str]:
        # no shared fact cache between the concurrent runs: each tag must stand on its own
        # read-only runs on a converged host, three at a time: the host lock (which refuses a second run
        # at once) is off for them
        proc = playbook(
            "site.yml", "--tags", tag, "-e", "sglang_lock_enabled=false",
            env={"ANSIBLE_CACHE_PLUGIN": "ansible.builtin.memory"},
        )  # fmt: skip
        return tag, proc.returncode, proc.stdout + proc.stderr

    # Read-only on a converged host, so three at a time (2 CPUs: ansible waits on the container).
    with ThreadPoolExecutor(max_workers=3) as pool:
        results = list(pool.map(run, tags))
    problems = []
    for tag, rc, out in results:
        recap = re.search(
            rf"^{LAB_HOST}\s*:\s*ok=\d+\s+changed=(\d+)\s+unreachable=0\s+failed=(\d+)", out, re.M
        )
        if rc != 0 or not recap or recap[1] != "0" or recap[2] != "0":
            problems.append(f"--tags {tag}: rc={rc}\n{out[-2500:]}")
    assert not problems, "\n\n".join(problems)


def systemd_words(exec_start: str) -> list[str]:
    """The argv systemd makes of an ExecStart= value (continuation lines, double quotes with \\-escapes,
    $$ and %% unescaped); ${NAME} is left as written (systemd expands it from the environment)."""
    text = exec_start.replace("\\\n", " ")
    words: list[str] = []
    i = 0
    while i < len(text):
        if text[i].isspace():
            i += 1
            continue
        word = ""
        if text[i] == '"':
            i += 1
            while text[i] != '"':
                if text[i] == "\\":
                    i += 1
                word += text[i]
                i += 1
            i += 1
        else:
            while i < len(text) and not text[i].isspace():
                word += text[i]
                i += 1
        words.append(word.replace("$$", "$").replace("%%", "%"))
    return words


SHIM = "/usr/local/lib/sglang-deploy/sglang_launch.py"  # sglang_service_launcher_shim


def unit_argv() -> list[str]:
    unit = lab_exec("cat", UNIT)
    match = re.search(r"^ExecStart=((?:.*\\\n)*.*)$", unit, re.M)
    assert match, unit
    return systemd_words(match[1])


@pytest.mark.parametrize("preset", ["tree", "baseline", "production"])  # production last: the converged state
def test_parser_checked_argv_equals_the_unit_argv(converged_lab: dict[str, object], preset: str) -> None:
    proc = playbook("site.yml", "--tags", "stack,service", "-e", f"sglang_preset={preset}")
    assert proc.returncode == 0, proc.stdout[-4000:]
    spec = json.loads(lab_exec("cat", "/etc/sglang/launch-args.json"))["launch_spec"]
    assert spec["preset"] == preset
    checked = json.loads(lab_exec("cat", "/opt/sglang/current/launch-check.json"))
    argv = unit_argv()
    # the unit runs the spec's argv behind the role's launcher (it hides the key from SGLang's log):
    # python, the launcher, then the spec's words after python
    assert argv[1] == SHIM
    assert checked["argv"] == argv[:1] + argv[2:] == spec["argv"]
    # systemd's own parse agrees (argv[] of `systemctl show`; no word here holds a space)
    shown = lab_exec("systemctl", "show", "-p", "ExecStart", "--value", "sglang-kimi")
    assert re.search(r"argv\[\]=(.*?) ;", shown)[1].split(" ") == argv  # type: ignore[index]
    speculative = [w for w in argv if w.startswith("--speculative")]
    if preset == "baseline":
        assert speculative == []
    else:
        topk = argv[argv.index("--speculative-eagle-topk") + 1]
        assert topk == ("1" if preset == "production" else "4")
    assert lab_exec("sh", "-c", "ls /opt/sglang/current/.launch-ok-* | wc -l").strip() != "0"


def test_a_parser_rejected_argv_stops_before_the_unit(converged_lab: dict[str, object]) -> None:
    """An argv only SGLang's own parser can reject (an unknown server flag passes preflight's rules)
    fails the stack stage; the unit is left as it was."""
    unit_before = lab_exec("sha256sum", UNIT)
    proc = playbook(
        "site.yml",
        "--tags",
        "stack_launch,sglang_service_install",
        "-e",
        '{"sglang_extra_args": ["--no-such-flag"]}',
    )
    assert proc.returncode != 0
    out = proc.stdout + proc.stderr
    assert "--no-such-flag" in out
    assert "unrecognized arguments" in out
    assert lab_exec("sha256sum", UNIT) == unit_before
