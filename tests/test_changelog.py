"""The changelog is antsibull-changelog's (changelogs/config.yaml, changelogs/fragments/, changelog.yaml):
its fragments lint clean, CHANGELOG.md is exactly what ``antsibull-changelog generate`` makes of
changelog.yaml, and every commit since the fragments were introduced that changes plugins/ or roles/
adds a fragment (or is a release, which consumes them into changelog.yaml)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TOOL = Path(sys.executable).parent / "antsibull-changelog"
COVERED = ("plugins/", "roles/")


def _collection_copy(tmp: Path) -> Path:
    """What antsibull-changelog reads, under ansible_collections/sglang/deploy (it finds the collection
    by that path and galaxy.yml)."""
    root = tmp / "ansible_collections" / "sglang" / "deploy"
    root.mkdir(parents=True)
    shutil.copy(REPO / "galaxy.yml", root)
    shutil.copy(REPO / "CHANGELOG.md", root)
    shutil.copytree(REPO / "changelogs", root / "changelogs")
    return root


def _tool(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(TOOL), *args], cwd=root, capture_output=True, text=True, check=False, timeout=300
    )


def test_fragments_lint_clean(tmp_path: Path) -> None:
    proc = _tool(_collection_copy(tmp_path), "lint")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.strip() == "", proc.stdout


def test_changelog_is_generated_from_changelog_yaml(tmp_path: Path) -> None:
    root = _collection_copy(tmp_path)
    (root / "CHANGELOG.md").unlink()
    proc = _tool(root, "generate")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (root / "CHANGELOG.md").read_text() == (REPO / "CHANGELOG.md").read_text(), (
        "CHANGELOG.md is not what `antsibull-changelog generate` makes: edit changelogs/ (a fragment, or "
        "a release), never CHANGELOG.md by hand"
    )


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), *args], capture_output=True, text=True, check=True, timeout=120
    ).stdout


def commits_without_fragment(repo: Path) -> list[str]:
    """``<sha> <subject>`` of each non-merge commit after the one that added changelogs/config.yaml
    that changes plugins/ or roles/ and adds no fragment (nor is a release: changelog.yaml changed)."""
    intro = _git(repo, "log", "--diff-filter=A", "--format=%H", "--", "changelogs/config.yaml").split()
    assert intro, "changelogs/config.yaml was never added"
    shas = _git(repo, "log", "--no-merges", "--format=%H", f"{intro[-1]}..HEAD").split()
    missing = []
    for sha in shas:
        lines = [
            ln.split("\t") for ln in _git(repo, "show", "--name-status", "--format=", sha).splitlines() if ln
        ]
        paths = [(parts[0], parts[-1]) for parts in lines]
        touched = any(path.startswith(COVERED) for _status, path in paths)
        fragment = any(
            status.startswith("A")
            and path.startswith("changelogs/fragments/")
            and path.endswith((".yml", ".yaml"))
            for status, path in paths
        )
        release = any(path == "changelogs/changelog.yaml" for _status, path in paths)
        if touched and not (fragment or release):
            missing.append(f"{sha[:10]} {_git(repo, 'log', '-1', '--format=%s', sha).strip()[:100]}")
    return missing


def test_every_change_to_plugins_or_roles_adds_a_fragment() -> None:
    # In a shallow clone the oldest commit present shows every file as added, config.yaml too: the
    # commits after it are checked (those the clone has).
    missing = commits_without_fragment(REPO)
    assert not missing, (
        "these commits change plugins/ or roles/ and add no changelogs/fragments/*.yml "
        "(use the 'trivial' section for a change users need not read about):\n" + "\n".join(missing)
    )


def test_the_rule_catches_a_commit_without_a_fragment(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    _git(repo, "init", "-q", "-b", "main")
    _git(repo, "config", "user.email", "t@example.invalid")
    _git(repo, "config", "user.name", "t")
    (repo / "changelogs" / "fragments").mkdir(parents=True)
    (repo / "changelogs" / "config.yaml").write_text("notesdir: fragments\n")
    (repo / "plugins").mkdir()
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", "changelog config")
    (repo / "plugins" / "a.py").write_text("x = 1\n")
    (repo / "changelogs" / "fragments" / "a.yml").write_text("minor_changes: [a]\n")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", "with a fragment")
    (repo / "plugins" / "a.py").write_text("x = 2\n")
    _git(repo, "commit", "-qam", "plugin change, no fragment")
    (repo / "README").write_text("docs\n")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", "docs only")
    missing = commits_without_fragment(repo)
    assert [m.split(" ", 1)[1] for m in missing] == ["plugin change, no fragment"]
