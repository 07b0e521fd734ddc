"""`sglang-deploy releases` and `sglang-deploy rollback` on the converged lab host (the session's
converged_lab). A second complete release is made the way tests/e2e/test_verify_lab.py makes one (a
hard-link copy of the first, its receipt renamed), so no second stack install is paid. Then: a
rollback to a release that does not exist is refused naming the allowed one; `rollback` moves
current to the previous release and the unit names it (lab mode: not started); `releases --json`
says which is current; `rollback --to <first>` moves it back. The host is left as converged: current
on the first release, the copy removed, the unit rendered for the first release again."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from e2e_lab import LAB_HOST, LAB_OVERRIDDEN, cli, lab_exec, lab_inventory

pytestmark = pytest.mark.e2e

ROOT = "/opt/sglang"
UNIT = "/etc/systemd/system/sglang-kimi.service"
RENAME_RECEIPT = (
    "import json, os, sys; path, rid = sys.argv[1:3]; data = json.load(open(path)); "
    "data['release_id'] = rid; os.unlink(path); open(path, 'w').write(json.dumps(data, indent=2))"
)


def current() -> str:
    return lab_exec("readlink", f"{ROOT}/current").strip().removeprefix("releases/")


@pytest.fixture(scope="module")
def releases(
    converged_lab: dict[str, object], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[str, str, list[str]]]:
    """(first, second, run options): the converged release and a copy of it, both complete."""
    options = ["--progress", "plain", "--artifacts", str(tmp_path_factory.mktemp("cli-lab-art"))]
    if LAB_OVERRIDDEN:
        options += ["-i", str(lab_inventory(Path(tmp_path_factory.mktemp("cli-lab-inv"))))]
    first = current()
    second = f"{first[:6]}e2ecli"
    lab_exec("sh", "-c", f"set -e; cd {ROOT}/releases; rm -rf {second}; cp -al {first} {second}")
    lab_exec("python3", "-c", RENAME_RECEIPT, f"{ROOT}/releases/{second}/receipt.json", second)
    try:
        yield first, second, options
    finally:
        if current() != first:
            cli("rollback", "--to", first, *options)
        lab_exec("rm", "-rf", f"{ROOT}/releases/{second}")


def test_releases_and_rollback(releases: tuple[str, str, list[str]]) -> None:
    first, second, options = releases
    listing = cli("releases", "--json", *options)
    assert listing.returncode == 0, listing.stderr[-3000:]
    host = json.loads(listing.stdout)["hosts"][LAB_HOST]
    assert host["current"] == first
    by_id = {rel["id"]: rel for rel in host["releases"]}
    assert set(by_id) == {first, second}
    assert by_id[first]["current"]
    assert not by_id[second]["current"]
    assert by_id[first]["complete"]
    assert by_id[first]["checks_ok"]
    assert by_id[first]["versions"]["sglang"]
    assert "TASK" in listing.stderr  # progress on stderr, the document alone on stdout

    refused = cli("rollback", "--to", "no-such-release", *options)
    assert refused.returncode == 2
    assert "cannot switch to no-such-release: release no-such-release is not complete" in refused.stdout
    assert f"Allowed: {second}" in refused.stdout
    assert current() == first

    moved = cli("rollback", "--json", *options)
    assert moved.returncode == 0, moved.stdout[-3000:] + moved.stderr[-6000:]
    outcome = json.loads(moved.stdout)["hosts"][LAB_HOST]
    assert (outcome["from"], outcome["to"]) == (first, second)
    assert "not started" in outcome["service"]  # lab mode
    assert current() == second
    assert f"#   release: {ROOT}/releases/{second}" in lab_exec("cat", UNIT)

    text = cli("releases", *options)
    assert f"{LAB_HOST}: current -> {second}" in text.stdout
    assert f" * {second}  " in text.stdout

    back = cli("rollback", "--to", first, *options)
    assert back.returncode == 0, back.stdout[-3000:]
    assert current() == first
    assert f"#   release: {ROOT}/releases/{first}" in lab_exec("cat", UNIT)


def test_verify_fetches_and_reports(releases: tuple[str, str, list[str]], tmp_path: Path) -> None:
    """`verify` on the lab (no GPU, no server: layers 1-5 say why they skip, no benchmark) with the
    document written anyway (verify_doc_write=always): the role's fetch lands under the report dir
    and report.md lists the layers and links the fetched files; no chart without figures."""
    first, _second, options = releases
    report_dir = tmp_path / "verify"
    proc = cli("verify", *options, "--report-dir", str(report_dir), "-e", "verify_doc_write=always", "--json")
    assert proc.returncode == 0, proc.stderr[-6000:]
    out = json.loads(proc.stdout)
    assert out["hosts"][LAB_HOST]["release_id"] == first
    assert out["charts"] == {}
    text = (report_dir / "report.md").read_text()
    # no benchmark, no gate in lab mode: the verdict says so (never "passed" without a comparison)
    assert f"| {LAB_HOST} | skipped | {first} | - |" in text
    assert "| 5 HTTP | skipped | sglang-kimi not running: not started in lab mode |" in text
    assert "No benchmark figures in this run (layer 6 did not run): no chart." in text
    fetched = report_dir / "fetched" / LAB_HOST / "var" / "lib" / "sglang-deploy"
    assert (fetched / "production_v2.md").is_file()
    assert f"- [production_v2.md](fetched/{LAB_HOST}/var/lib/sglang-deploy/production_v2.md)" in text
