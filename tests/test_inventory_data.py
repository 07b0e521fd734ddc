"""sglang.deploy.inventory_record (plugin_utils/inventory_data.py dump): what a host reported is written as
data and read back as text.

The attack of issue 21: a GPU host prints ``{{ lookup('pipe', ...) }}`` as its GPU name, autotune or
verify writes it into host_vars, and the next run templates it on the controller. Here a real
ansible-playbook (local connection) writes such a record with the filter, a second real run loads it
from host_vars and uses it in a debug, a copy and a set_fact: nothing runs (the marker file of the
pipe lookup never appears) and the literal text comes out.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from modload import REPO, load_module

inventory_data = load_module("inventory_data", REPO / "plugins/plugin_utils/inventory_data.py")
ANSIBLE_PLAYBOOK = Path(sys.executable).parent / "ansible-playbook"


def test_subclasses_of_the_plain_types_are_written_as_them() -> None:
    """Ansible's tagged values are subclasses of int, float, str, dict, list (the dumper knew none)."""

    class TaggedInt(int):
        pass

    class TaggedFloat(float):
        pass

    class TaggedStr(str):
        pass

    text = inventory_data.dump({"rec": {"n": TaggedInt(6), "x": TaggedFloat(2.5), "s": TaggedStr("{{ x }}")}})
    assert yaml.load(text, Loader=_loader_without_unsafe()) == {"rec": {"n": 6, "x": 2.5, "s": "{{ x }}"}}


def test_every_string_is_tagged_and_the_data_round_trips() -> None:
    record = {
        "nccl_env_tuned": {
            "gpu": "{{ 1 + 1 }}",
            "vars": {"NCCL_{{x}}": "{% raw %}"},
            "n": [1, 2.5, None, True],
        }
    }
    text = inventory_data.dump(record, header="line one\nline two")
    assert text.startswith("---\n# line one\n# line two\n")
    assert "!unsafe '{{ 1 + 1 }}'" in text
    assert "!unsafe 'NCCL_{{x}}'" in text
    assert text.count("!unsafe") == 6  # 4 keys below the variable name, 2 string values
    assert yaml.load(text, Loader=_loader_without_unsafe()) == record


def test_strings_that_look_like_other_types_come_back_as_strings() -> None:
    """Ansible resolves an !unsafe scalar as if it were plain: a timestamp, bool or number string must
    still read back as the same string through Ansible's own loader."""
    from ansible.parsing.utils.yaml import from_yaml  # type: ignore[import-untyped]  # noqa: PLC0415

    record = {
        "r": {"at": "2026-11-30T19:12:51Z", "b": "true", "f": "2.5", "i": "007", "n": "~", "j": "{{ 1 }}"}
    }
    text = inventory_data.dump(record)
    loaded = from_yaml(text)
    assert loaded == record
    assert all(isinstance(v, str) for v in loaded["r"].values()), loaded  # no datetime/bool/float/int/None
    assert "!unsafe '{{ 1 }}'" in text


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"ok": "a\nb"}, "control character"),
        ({"ok": {"k": "\x1b[31m"}}, "control character"),
        ({"ok": float("nan")}, "finite"),
        ({"not a name": 1}, "variable name"),
        ({"ok": object()}, "cannot be written"),
    ],
)
def test_refuses_what_is_no_record(data: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        inventory_data.dump(data)


def _loader_without_unsafe() -> type[yaml.SafeLoader]:
    class Loader(yaml.SafeLoader):
        pass

    Loader.add_constructor("!unsafe", lambda loader, node: loader.construct_scalar(node))  # type: ignore[arg-type]
    return Loader


def test_a_host_that_prints_jinja_runs_nothing_on_the_controller(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    evil = "{{ lookup('pipe', 'touch " + str(marker) + "') }}"
    evil_block = "{% for x in [1] %}" + evil + "{% endfor %}"
    (tmp_path / "host_vars" / "localhost").mkdir(parents=True)
    (tmp_path / "hosts.yml").write_text("all:\n  hosts:\n    localhost:\n      ansible_connection: local\n")
    reported = {"gpu_name": evil, "nccl_version": evil_block, "figures": {evil: 1.5}}
    (tmp_path / "reported.json").write_text(json.dumps(reported))
    (tmp_path / "write.yml").write_text(
        """---
- hosts: localhost
  gather_facts: false
  tasks:
    - name: What the host printed (registered output is untrusted data)
      ansible.builtin.command:
        argv: [cat, "{{ playbook_dir }}/reported.json"]
      register: probe
      changed_when: false
    - name: Write it as a record (the collection's one writer of host_vars records)
      sglang.deploy.inventory_record:
        path: "{{ playbook_dir }}/host_vars/localhost/record.yml"
        variable: evil_record
        value: "{{ probe.stdout | from_json }}"
        header: test
        mode: "0644"
"""
    )
    (tmp_path / "read.yml").write_text(
        """---
- hosts: localhost
  gather_facts: false
  tasks:
    - name: Use the record in a template, a set_fact and a copy
      ansible.builtin.set_fact:
        seen: "GPU={{ evil_record.gpu_name }} NCCL={{ evil_record.nccl_version }}"
    - name: Write what was seen
      ansible.builtin.copy:
        content: "{{ seen }}\\n{{ evil_record | to_json }}\\n"
        dest: "{{ playbook_dir }}/seen.txt"
        mode: "0644"
"""
    )
    env = {"PATH": f"{ANSIBLE_PLAYBOOK.parent}:/usr/bin:/bin", "ANSIBLE_CONFIG": str(REPO / "ansible.cfg"),
           "HOME": str(tmp_path), "LC_ALL": "C.UTF-8"}  # fmt: skip
    for play in ("write.yml", "read.yml", "read.yml"):
        proc = subprocess.run(
            [str(ANSIBLE_PLAYBOOK), "-i", str(tmp_path / "hosts.yml"), str(tmp_path / play)],
            cwd=REPO, env=env, capture_output=True, text=True, timeout=300, check=False,
        )  # fmt: skip
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert not marker.exists()
    record_text = (tmp_path / "host_vars/localhost/record.yml").read_text()
    assert yaml.load(record_text, Loader=_loader_without_unsafe())["evil_record"] == reported
    seen = (tmp_path / "seen.txt").read_text().splitlines()
    assert seen[0] == f"GPU={evil} NCCL={evil_block}"
    assert json.loads(seen[1]) == reported
