"""The input rules of the role sglang_router (run by sglang.deploy.validate_inputs; see __init__.py).

The policy, addresses and ports (the one host and port rules), the two keys (the one key rule; never
printed), paths, names, the address policy, the installer's URLs and pins, the numeric knobs, and the
worker start-up timeout against the servers' start-up as verify measured it (``startup_s`` of each
server's ``verify_baseline_records``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from ansible_collections.sglang.deploy.plugins.module_utils.convert import as_bool, valid_host, valid_port
from ansible_collections.sglang.deploy.plugins.module_utils.launch_spec import valid_api_key
from ansible_collections.sglang.deploy.plugins.plugin_utils.input_rules import as_json, full

FACTS: tuple[str, ...] = ()
GROUP_FACTS = {"sglang_servers": ("verify_baseline_records",)}
ABS = r"/[A-Za-z0-9_.-]+(/[A-Za-z0-9_.-]+)*"
ABS_ALLOWED = "an absolute path of letters, digits and _ . - /"
IP = r"[0-9A-Fa-f:.]+(/[0-9]{1,3})?|any|localhost|link-local|multicast"
HOST_ALLOWED = "an IPv4/IPv6 address or an RFC 1123 host name (the one host rule, sglang.deploy.host)"
KEY_CHARS = "16-256 characters of A-Z a-z 0-9 . _ ~ + / = : @ -, not starting with -"
VAULT = "put it in an ansible-vault file, group_vars/sglang_routers/vault.yml"
LOOPBACK_URL = r"https?://(127([.][0-9]{1,3}){3}|localhost|\[::1\]):[0-9]{1,5}"
# (name, lowest, highest) of every integer knob
NUMBERS = (
    ("sglang_router_health_check_interval_secs", 1, 3600),
    ("sglang_router_health_check_timeout_secs", 1, 600),
    ("sglang_router_health_failure_threshold", 1, 100),
    ("sglang_router_health_success_threshold", 1, 100),
    ("sglang_router_worker_startup_timeout_secs", 1, 86400),
    ("sglang_router_worker_startup_check_interval", 1, 600),
    ("sglang_router_request_timeout_secs", 1, 86400),
    ("sglang_router_retry_max_retries", 1, 100),
    ("sglang_router_retry_initial_backoff_ms", 1, 600000),
    ("sglang_router_retry_max_backoff_ms", 1, 3600000),
    ("sglang_router_cb_failure_threshold", 1, 100000),
    ("sglang_router_cb_success_threshold", 1, 100000),
    ("sglang_router_cb_timeout_duration_secs", 1, 86400),
    ("sglang_router_cb_window_duration_secs", 1, 86400),
    ("sglang_router_max_concurrent_requests", -1, 1000000),
    ("sglang_router_shutdown_grace_period_secs", 0, 3600),
    ("sglang_router_keep_releases", 2, 20),
    ("sglang_router_health_timeout", 1, 3600),
    ("sglang_router_health_delay", 1, 60),
    ("sglang_router_worker_wait_s", 1, 86400),
    ("sglang_router_worker_wait_delay", 1, 60),
    ("sglang_router_api_timeout", 1, 600),
)


def _text(value: Any) -> str:
    """A value as Jinja's ``string`` filter writes it (None as "None", as the former checks read it)."""
    return str(value)


def _network(v: Mapping[str, Any], bad: Any) -> None:
    policy = v.get("sglang_router_policy")
    if not full("random|round_robin|cache_aware|power_of_two", policy):
        bad("sglang_router_policy", policy, "one of random, round_robin, cache_aware, power_of_two")
    for var in ("sglang_router_host", "sglang_router_prometheus_host"):
        if not valid_host(v.get(var)):
            bad(var, v.get(var), HOST_ALLOWED)
    port, metrics = v.get("sglang_router_port"), v.get("sglang_router_prometheus_port")
    if not valid_port(port):
        bad(
            "sglang_router_port",
            port,
            "an integer 1024-65535 "
            "(the one port rule, sglang.deploy.port; the unit has no CAP_NET_BIND_SERVICE)",
        )
    if not (valid_port(metrics) and int(str(metrics)) != (int(str(port)) if valid_port(port) else None)):
        bad(
            "sglang_router_prometheus_port",
            metrics,
            "an integer 1024-65535 (sglang.deploy.port), not sglang_router_port",
        )
    allow = v.get("sglang_router_ip_address_allow")
    if not (isinstance(allow, list | tuple) and len(allow) > 0 and all(full(IP, a) for a in allow)):
        bad(
            "sglang_router_ip_address_allow",
            allow,
            "a non-empty list of addresses/prefixes (10.0.0.0/8, ::1) "
            "or any, localhost, link-local, multicast",
        )
    if (
        isinstance(allow, list | tuple | str)
        and "any" in allow
        and v.get("sglang_router_ip_address_allow_any") is not True
    ):
        bad(
            "sglang_router_ip_address_allow",
            allow,
            "a list without any (the router's unit then has no address policy: every address may reach its "
            "client port and its open /metrics): name the client and worker networks (e.g. [localhost, "
            "10.0.0.0/24]), or set sglang_router_ip_address_allow_any: true to opt in",
        )


def _keys(v: Mapping[str, Any], bad: Any) -> None:
    key, admin = _text(v.get("sglang_router_api_key", "")), _text(v.get("sglang_router_admin_api_key", ""))
    required = v.get("sglang_router_api_key_required")
    if not ((key == "" and as_bool(required) is not True) or valid_api_key(key)):
        bad(
            "sglang_router_api_key",
            "<set>" if key else "",
            f"{KEY_CHARS} (the one key rule, sglang.deploy.api_key; required while "
            f"sglang_router_api_key_required is true: {VAULT})",
        )
    if not (valid_api_key(admin) and admin != key):
        bad(
            "sglang_router_admin_api_key",
            "<set>" if admin else "",
            f"{KEY_CHARS} (sglang.deploy.api_key), required and different from sglang_router_api_key: "
            "it is the only key sglang-router's /workers accepts (--control-plane-api-keys, role admin), "
            f"so clients holding the client key cannot add or remove workers; {VAULT}",
        )
    admin_file = v.get("sglang_router_admin_api_key_file")
    if not (full(ABS, admin_file) and admin_file != v.get("sglang_router_api_key_file")):
        bad("sglang_router_admin_api_key_file", admin_file, f"{ABS_ALLOWED}, not sglang_router_api_key_file")


def _host_side(v: Mapping[str, Any], bad: Any) -> None:
    for var in (
        "sglang_router_api_key_required",
        "sglang_router_workers_prune",
        "sglang_router_start",
        "sglang_router_ip_address_allow_any",
    ):
        if not isinstance(v.get(var), bool):
            bad(var, v.get(var), "true or false")
    for var, allowed in (
        ("sglang_router_root", ABS_ALLOWED),
        ("sglang_router_api_key_file", ABS_ALLOWED),
        ("sglang_router_verify_results_file", ABS_ALLOWED),
        ("sglang_router_python", "the absolute path of a CPython >= 3.11 interpreter"),
    ):
        if not full(ABS, v.get(var)):
            bad(var, v.get(var), allowed)
    name = v.get("sglang_router_service_name")
    if not (full("[a-z][a-z0-9_-]{0,63}", name) and name != "sglang-kimi"):
        bad("sglang_router_service_name", name, "a unit name of a-z 0-9 _ - (not the server's sglang-kimi)")
    for var, what in (("sglang_router_user", "user"), ("sglang_router_group", "group")):
        if not full("[a-z_][a-z0-9_-]{0,31}", v.get(var)):
            bad(var, v.get(var), f"a {what} name of a-z 0-9 _ - (up to 32 characters)")
    index = v.get("sglang_router_index_url")
    if not (index == "" or full(r"https?://[^\s]+", index)):
        bad("sglang_router_index_url", index, "'' (the installer's configured index) or an http(s) URL")
    api_url = v.get("sglang_router_api_url")
    if not (api_url == "" or full(LOOPBACK_URL, api_url)):
        bad(
            "sglang_router_api_url",
            api_url,
            "'' (this router host's own admin URL) or http(s)://LOOPBACK:PORT (127.x.x.x, localhost, [::1]): "
            "the admin key is sent there, and it never leaves the router host",
        )
    if not full(r"[0-9]+(\.[0-9]+){1,3}", _text(v.get("sglang_router_version"))):
        bad(
            "sglang_router_version",
            v.get("sglang_router_version"),
            "a release version such as 0.3.2 (group_vars/all/versions.yml)",
        )
    sums = v.get("sglang_router_wheel_sha256")
    if not (isinstance(sums, list | tuple) and len(sums) > 0 and all(full("[0-9a-f]{64}", s) for s in sums)):
        bad(
            "sglang_router_wheel_sha256",
            sums,
            "a non-empty list of sha256 hex digests (group_vars/all/versions.yml)",
        )


def measured_startups(v: Mapping[str, Any]) -> list[float]:
    """The ``startup_s`` of every baseline record of the servers (numbers only)."""
    hosts = (v.get("group_facts") or {}).get("sglang_servers") or {}
    found: list[float] = []
    for facts in hosts.values():
        records = facts.get("verify_baseline_records") or {}
        for record in records.values() if isinstance(records, Mapping) else ():
            startup = record.get("startup_s") if isinstance(record, Mapping) else None
            if isinstance(startup, int | float) and not isinstance(startup, bool):
                found.append(float(startup))
    return found


def _numbers(v: Mapping[str, Any], bad: Any) -> None:
    for var, low, high in NUMBERS:
        value = v.get(var)
        if not (full("-?[0-9]+", _text(value)) and low <= int(_text(value)) <= high):
            bad(var, value, f"an integer {low}-{high}")
    longest = max([0.0, *measured_startups(v)])
    timeout = v.get("sglang_router_worker_startup_timeout_secs")
    if full("-?[0-9]+", _text(timeout)) and int(_text(timeout)) < longest:
        bad(
            "sglang_router_worker_startup_timeout_secs",
            timeout,
            f"an integer >= {math.ceil(longest)} (the longest start-up verify measured on the servers, "
            "startup_s of their verify_baseline_records)",
        )


def errors(v: Mapping[str, Any]) -> list[str]:
    """Every error of the sglang_router inputs."""
    errs: list[str] = []

    def bad(var: str, value: Any, allowed: str) -> None:
        errs.append(f"sglang_router: invalid input: {var}={as_json(value)} is not valid: allowed {allowed}")

    _network(v, bad)
    _keys(v, bad)
    _host_side(v, bad)
    _numbers(v, bad)
    return errs
