"""The controller's verify_results_file is scrubbed as a whole (issue 32 item 5).

The action every layer and the benchmark write through (sglang.deploy.verify_layers; the benchmark's
task in roles/verify/tasks/bench_run.yml, with the same arguments) runs with `ansible-playbook` on the
controller itself (`connection: local`, no container) over a verify_results that quotes the API key in
reasons and carries SGLang's server info (api_key, admin_api_key in clear, as /get_server_info returns
them): the file holds neither key, every secret-named field is masked, the rest is kept, and the
benchmark's printed report line shows no key either.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import yaml
from modload import REPO, local_ansible_env

KEY = "TestKey-0123456789-results"  # test-only value
ADMIN = "AdminKey-9876543210-results"  # test-only value, a key the run does not know


def test_results_file_is_scrubbed(tmp_path: Path) -> None:
    results = tmp_path / "verify-results.json"
    playbook = tmp_path / "write.yml"
    playbook.write_text(
        yaml.safe_dump(
            [
                {
                    "name": "Report the benchmark and write verify_results as bench_run.yml does",
                    "hosts": "localhost",
                    "gather_facts": False,
                    "tasks": [
                        {
                            "name": "Report and write",
                            "sglang.deploy.verify_layers": {
                                "recorded": [{"key": "bench", "title": "6 (benchmark)"}],
                                "results": "{{ verify_results }}",
                                "results_file": "{{ verify_results_file }}",
                                "secrets": ["{{ sglang_api_key | default('') | string }}"],
                            },
                        }
                    ],
                }
            ]
        )
    )
    extra = {
        "verify_results_file": str(results),
        "sglang_api_key": KEY,
        "verify_results": {
            "http": {"status": "failed", "reason": f"401 with Authorization: Bearer {KEY}"},
            "bench": {
                "status": "passed",
                "reason": f"C=1: 123.4 tok/s (key {KEY})",
                "server_info": {"api_key": KEY, "admin_api_key": ADMIN, "tp_size": 8},
                "runs": [{"level": 1, "output_throughput": 123.4}],
            },
        },
    }
    vars_file = tmp_path / "vars.json"
    vars_file.write_text(json.dumps(extra))
    inventory = tmp_path / "hosts.yml"
    inventory.write_text(
        yaml.safe_dump(
            {
                "all": {
                    "hosts": {
                        "localhost": {
                            "ansible_connection": "local",
                            "ansible_python_interpreter": sys.executable,
                        }
                    }
                }
            }
        )
    )
    proc = subprocess.run(
        [
            str(Path(sys.executable).with_name("ansible-playbook")),
            "-i",
            str(inventory),
            str(playbook),
            "-e",
            f"@{vars_file}",
        ],
        cwd=REPO,
        env=local_ansible_env(),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
    assert "verify layer 6 (benchmark) passed: C=1: 123.4 tok/s (key ********)" in proc.stdout
    assert KEY not in proc.stdout + proc.stderr
    text = results.read_text()
    assert KEY not in text
    assert ADMIN not in text
    doc = json.loads(text)
    assert doc["host"] == "localhost"
    assert doc["results"]["bench"]["server_info"] == {
        "api_key": "********",
        "admin_api_key": "********",
        "tp_size": 8,
    }
    assert doc["results"]["http"]["reason"] == "401 with Authorization: Bearer ********"
    assert doc["results"]["bench"]["runs"] == [{"level": 1, "output_throughput": 123.4}]
