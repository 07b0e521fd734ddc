"""The lookup sglang.deploy.module_utils_source: the text of the collection's own module_utils (the
benchmark's scrubber and secret-name rule go to the host through it), through ansible for real, and
its refusals."""

from __future__ import annotations

import hashlib
import subprocess

import pytest
from ansible.errors import AnsibleLookupError  # type: ignore[import-untyped]
from modload import REPO, load_module

lookup = load_module("module_utils_source", REPO / "plugins/lookup/module_utils_source.py")


@pytest.mark.parametrize("name", ["verify_scrub", "secret_names"])
def test_the_source_is_the_collection_s_file(name: str) -> None:
    assert lookup.source_of(name) == (REPO / "plugins/module_utils" / f"{name}.py").read_text()


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("../filter/sandbox", "is not a module name"),
        ("verify_scrub.py", "is not a module name"),
        ("verify_scrub\n", "is not a module name"),
        ("", "is not a module name"),
        ("no_such_module", "is not a module_utils of sglang.deploy"),
    ],
)
def test_anything_but_a_module_of_the_collection_is_refused(name: str, message: str) -> None:
    with pytest.raises(AnsibleLookupError, match=message):
        lookup.source_of(name)


def adhoc(expr: str) -> subprocess.CompletedProcess[str]:
    """`ansible localhost -m debug -a msg=<expr>`: the lookup as a play would call it."""
    return subprocess.run(
        [str(REPO / ".venv/bin/ansible"), "localhost", "-m", "ansible.builtin.debug", "-a", f"msg={expr}"],
        cwd=REPO, capture_output=True, text=True, check=False, timeout=120,
    )  # fmt: skip


def test_a_missing_module_is_refused_under_ansible_s_collection_finder() -> None:
    """Under ansible-playbook the collection finder answers find_spec for a missing module with an
    exception (ValueError, ImportError), not None: still the lookup's own refusal."""
    expr = "{{ lookup('sglang.deploy.module_utils_source', 'no_such_module') }}"
    run = adhoc(expr)
    assert run.returncode != 0
    assert "'no_such_module' is not a module_utils of sglang.deploy" in run.stdout + run.stderr, run.stdout


def test_through_ansible() -> None:
    """ansible's own lookup resolution (FQCN, the collection from ANSIBLE_COLLECTIONS_PATH as the roles
    find it): the text arrives whole."""
    expr = "{{ lookup('sglang.deploy.module_utils_source', 'secret_names') | hash('sha256') }}"
    run = adhoc(expr)
    assert run.returncode == 0, run.stdout + run.stderr
    want = hashlib.sha256((REPO / "plugins/module_utils/secret_names.py").read_bytes()).hexdigest()
    assert want in run.stdout, run.stdout
