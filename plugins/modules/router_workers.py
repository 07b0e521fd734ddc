#!/usr/bin/python
# Copyright: sglang-deploy contributors
"""Make an SGLang router's worker list equal to the inventory.

Logic: plugins/module_utils/router_workers.py.
"""

from __future__ import annotations

DOCUMENTATION = r"""
module: router_workers
short_description: Make an sglang-router's worker list equal to the verified servers of the inventory
description:
  - Role sglang_router's entry point C(workers) (after the servers' verify). The module reads the router's
    C(GET /workers), registers every wanted server the router does not list (C(POST /workers) with the
    server's own API key in the body, which the router uses to reach it), removes every listed worker no
    wanted server has (C(DELETE /workers/ID), only with O(prune)), then waits until the router lists every
    wanted URL healthy (the router adds a worker in a background job, so the POST answers 202).
  - Which servers are wanted is the caller's decision (O(servers[].wanted)); the role sets it from the
    servers' verify verdicts.
  - The rolling upgrade (playbooks/tasks/router_drain.yml, router_readmit.yml) uses it for one replica at a
    time - O(remove) to take it out before its restart, one wanted server with O(prune=false) to put it back
    after its verify - so every change of a router's worker list goes through this one module.
  - "The result's C(msg) is the report, one line per server or worker (for example C(router r1: worker
    http://10.0.0.11:30000 registered but not in the inventory)); C(sglang-deploy drift) names these lines."
  - Check mode reads only (C(GET /workers)) and reports each difference as C(changed), with the line that
    says what a real run would do; a router that does not answer is reported (not installed or not started
    yet) and every wanted server counts as missing.
  - Requests go to O(api_url) directly, never through a proxy of the host's environment; the admin key
    travels in the C(Authorization) header, the servers' keys in the POST body, and neither is returned.
options:
  api_url:
    description: The router's API base URL (C(http://127.0.0.1:30080)), without a trailing C(/).
    type: str
    required: true
  admin_key:
    description: >-
      The router's admin API key (its C(/workers) routes take no other); empty for a router without one.
    type: str
    default: ""
  router:
    description: The router's name in the report's lines (the inventory host).
    type: str
    required: true
  servers:
    description: Every rank-0 server host of the inventory, in inventory order.
    type: list
    elements: dict
    required: true
    suboptions:
      host:
        description: The server's inventory name.
        type: str
        required: true
      url:
        description: The URL the router reaches it at (C(sglang_router_worker_url)).
        type: str
        required: true
      status:
        description: Its verify status, for the report of a server that is not wanted.
        type: str
        default: ""
      wanted:
        description: Whether it belongs in the router (its verify passed).
        type: bool
        default: false
      api_key:
        description: The server's own API key, sent in the registration's body; empty for none.
        type: str
        default: ""
  prune:
    description: Remove the listed workers that no wanted server has.
    type: bool
    default: true
  remove:
    description:
      - Worker URLs to take out of the router whatever O(servers) says (the rolling upgrade's drain, before
        the replica's restart); each listed one is removed (C(DELETE /workers/ID)), then the module waits
        until the router no longer lists it. One that is not listed is no change.
    type: list
    elements: str
    default: []
  timeout_s:
    description: Timeout of one request, seconds.
    type: int
    default: 10
  wait_s:
    description: >-
      How long to wait for the registered workers to be listed healthy, and the removed ones of O(remove)
      to be no longer listed, seconds.
    type: int
    default: 600
  wait_delay_s:
    description: Seconds between two looks at the worker list while waiting.
    type: int
    default: 2
attributes:
  check_mode:
    support: full
    description: Reads the worker list only; reports what a real run would register or remove.
author: sglang-deploy contributors (@sglang-deploy)
"""

EXAMPLES = r"""
- name: Make the router's worker list equal to the verified servers
  sglang.deploy.router_workers:
    api_url: http://127.0.0.1:30080
    admin_key: "{{ sglang_router_admin_api_key }}"
    router: "{{ inventory_hostname }}"
    servers:
      - {host: gpu-node-01, url: "http://10.0.0.11:30000", status: passed, wanted: true, api_key: "{{ k1 }}"}
      - {host: gpu-node-02, url: "http://10.0.0.12:30000", status: failed, wanted: false}
    prune: true
  register: workers

- name: Take one replica out of the router before its restart (the roll's drain)
  sglang.deploy.router_workers:
    api_url: http://127.0.0.1:30080
    admin_key: "{{ sglang_router_admin_key }}"
    router: router-01
    servers: []
    prune: false
    remove: [http://10.0.0.12:30000]
    wait_s: 30
  delegate_to: router-01
"""

RETURN = r"""
listed:
  description: The router's workers before any change, [{id, url, healthy}].
  returned: always
  type: list
  elements: dict
missing:
  description: The wanted servers the router did not list, [{host, url}] (registered unless in check mode).
  returned: always
  type: list
  elements: dict
removed:
  description: >-
    The listed workers no wanted server has (empty without prune) and those of O(remove), [{id, url}]
    (removed unless in check mode).
  returned: always
  type: list
  elements: dict
answered:
  description: Whether the router answered C(GET /workers) (false only in check mode; a real run fails).
  returned: always
  type: bool
msg:
  description: The report, one line per server or worker.
  returned: always
  type: list
  elements: str
"""

import json
import time
import urllib.error
import urllib.parse
from typing import Any

from ansible.module_utils.basic import AnsibleModule  # type: ignore[import-untyped]
from ansible.module_utils.urls import open_url  # type: ignore[import-untyped]
from ansible_collections.sglang.deploy.plugins.module_utils import roll
from ansible_collections.sglang.deploy.plugins.module_utils import router_workers as rule

SERVER_SPEC: dict[str, Any] = {
    "host": {"type": "str", "required": True},
    "url": {"type": "str", "required": True},
    "status": {"type": "str", "default": ""},
    "wanted": {"type": "bool", "default": False},
    "api_key": {"type": "str", "default": "", "no_log": True},
}
ARGUMENT_SPEC: dict[str, Any] = {
    "api_url": {"type": "str", "required": True},
    "admin_key": {"type": "str", "default": "", "no_log": True},
    "router": {"type": "str", "required": True},
    "servers": {"type": "list", "elements": "dict", "required": True, "options": SERVER_SPEC},
    "prune": {"type": "bool", "default": True},
    "remove": {"type": "list", "elements": "str", "default": []},
    "timeout_s": {"type": "int", "default": 10},
    "wait_s": {"type": "int", "default": 600},
    "wait_delay_s": {"type": "int", "default": 2},
}


class Router:
    """The router's /workers API, the admin key in every request's header."""

    def __init__(self, module: AnsibleModule) -> None:
        p = module.params
        self.module = module
        self.base = str(p["api_url"]).rstrip("/")
        self.timeout = int(p["timeout_s"])
        self.headers = {"Content-Type": "application/json"}
        if p["admin_key"]:
            self.headers["Authorization"] = f"Bearer {p['admin_key']}"

    def call(self, method: str, path: str, body: dict[str, Any] | None = None) -> tuple[int, Any]:
        """(status, JSON body or None); a connection error raises OSError."""
        data = json.dumps(body) if body is not None else None
        try:
            response = open_url(
                self.base + path, method=method, data=data, headers=self.headers, timeout=self.timeout,
                use_proxy=False, validate_certs=True, follow_redirects="none",
            )  # fmt: skip
            status, text = int(response.status), response.read()
        except urllib.error.HTTPError as error:  # an answer, not a failure to connect
            status, text = int(error.code), error.read()
        try:
            return status, json.loads(text) if text else None
        except ValueError:
            return status, None

    def listed(self) -> list[dict[str, Any]]:
        status, body = self.call("GET", "/workers")
        if status != 200:
            raise OSError(f"GET {self.base}/workers answered {status}")
        listed: list[dict[str, Any]] = roll.workers(body)
        return listed

    def change(self, method: str, path: str, body: dict[str, Any] | None, ok: tuple[int, ...]) -> None:
        status, _answer = self.call(method, path, body)
        if status not in ok:
            raise OSError(f"{method} {self.base}{path} answered {status}")

    def await_list(self, healthy: list[str], gone: list[str], wait_s: int, delay_s: int) -> None:
        """Until the router lists every URL of ``healthy`` healthy and none of ``gone``; OSError after
        ``wait_s``."""
        deadline, now, answered = time.monotonic() + wait_s, [], False
        while True:
            try:
                now, answered = self.listed(), True
            except (OSError, ValueError):
                now, answered = [], False
            if rule.all_healthy(now, healthy) and answered and rule.none_listed(now, gone):
                return
            if time.monotonic() >= deadline:
                listed = sorted(w["url"] for w in now if w["healthy"])
                raise OSError(
                    f"after {wait_s} s the router lists healthy {listed}, wanted all of "
                    f"{sorted(set(healthy))} and none of {sorted(set(gone))}"
                )
            time.sleep(delay_s)


def main() -> None:
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    p = module.params
    name, router = str(p["router"]), Router(module)
    servers = [{k: s[k] for k in ("host", "url", "status", "wanted")} for s in p["servers"]]
    result: dict[str, Any] = {"changed": False, "listed": [], "missing": [], "removed": [], "answered": True}
    try:
        result["listed"] = router.listed()
    except (OSError, ValueError) as error:
        if not module.check_mode:
            module.fail_json(msg=f"router {name}: {router.base}/workers: {error}", **result)
        result["answered"] = False
    plan = rule.plan(result["listed"], servers, router=name, prune=bool(p["prune"]), remove=p["remove"])
    result.update(missing=plan["missing"], removed=plan["extra"], msg=list(plan["messages"]))
    if not result["answered"]:
        note = f"router {name}: not answering on {router.base} (check mode: not installed or not started yet)"
        result["msg"].insert(0, note)
    result["changed"] = bool(plan["missing"] or plan["extra"] or not result["answered"])
    if module.check_mode or not result["changed"]:
        module.exit_json(**result)
    keys = {str(s["host"]): str(s["api_key"] or "") for s in p["servers"]}
    try:
        for item in plan["missing"]:
            key = keys[item["host"]]
            router.change(
                "POST", "/workers", {"url": item["url"], **({"api_key": key} if key else {})}, (200, 201, 202)
            )
        for item in plan["extra"]:  # 404: the router has removed it already, which is the goal
            router.change(
                "DELETE", f"/workers/{urllib.parse.quote(item['id'], safe='')}", None, (200, 202, 204, 404)
            )
        gone = [str(item["url"]) for item in plan["extra"] if item["url"] in set(p["remove"])]
        if plan["missing"] or gone:
            wanted = [str(s["url"]) for s in servers if s["wanted"]] if plan["missing"] else []
            router.await_list(wanted, gone, int(p["wait_s"]), int(p["wait_delay_s"]))
    except OSError as error:
        module.fail_json(msg=f"router {name}: {error}", **result)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
