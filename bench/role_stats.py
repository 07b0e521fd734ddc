"""Per role: how many tasks, how many of them are bookkeeping, and how much YAML and Python it takes.

usage: bench/role_stats.py [REPO] [--json]     (REPO: a checkout, default this one; any commit works:
                                                  `git worktree add /tmp/stats-base <commit>` and pass it)

Columns (one row per role, then the playbooks, then the total):
- tasks: every task of the role's tasks/ and handlers/ files, loaded as YAML (the tasks inside
  block/rescue/always counted one by one; a block itself is no task). Files no task list reaches
  (vars/, molecule/) are not counted here.
- files: those task files (tasks/ and handlers/; the playbooks row: the task files its plays include,
  playbooks/tasks/).
- book%: the share of those tasks whose action is set_fact, assert, debug, include_* / import_*
  (tasks, role, vars, playbook), meta or fail, the bookkeeping around the tasks that do something
  on a host; the next columns split it (set_fact, assert+fail, debug, include/import, meta).
- yaml: lines of the role's own YAML outside molecule/ (tasks, handlers, defaults, vars, meta,
  templates named *.yml.j2 are templates and not counted); yaml_mol: its molecule/ YAML.
- py: lines of the Python the role runs: its own .py files outside molecule/ plus every plugin of
  the collection its YAML calls by FQCN (sglang.deploy.<name>: the filter file defining the filter,
  the test file defining the test, plugins/modules/<name>.py, lookup/callback files) and, transitively,
  the module_utils those files import. A plugin used by several roles counts in full for each of them
  (the total row counts every file once). py_test: the role's molecule/ Python (testinfra tests).
Lines are physical lines, blank and comment lines included (as `wc -l`).
"""

from __future__ import annotations

import argparse
import ast
import json
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

BOOKKEEPING = {
    "set_fact": ("set_fact",),
    "assert": ("assert", "fail"),
    "debug": ("debug",),
    "include": (
        "include_tasks",
        "import_tasks",
        "include_role",
        "import_role",
        "include_vars",
        "import_playbook",
        "include",
    ),
    "meta": ("meta",),
}
# keys of a task that are no module (ansible's task keywords)
TASK_KEYWORDS = {
    "name", "when", "tags", "register", "loop", "loop_control", "with_items", "with_dict",
    "with_list", "with_together", "with_subelements", "with_nested", "with_sequence", "with_fileglob",
    "vars", "become", "become_user", "become_method", "delegate_to", "delegate_facts", "run_once",
    "changed_when", "failed_when", "check_mode", "diff", "no_log", "notify", "listen", "environment",
    "args", "retries", "delay", "until", "ignore_errors", "ignore_unreachable", "any_errors_fatal",
    "throttle", "timeout", "async", "poll", "module_defaults", "collections", "connection",
    "local_action", "action", "debugger", "remote_user", "port", "block", "rescue", "always",
    "apply",
}  # fmt: skip
FQCN = re.compile(r"\bsglang\.deploy\.([a-z_][a-z0-9_]*)")
MODULE_UTILS = re.compile(
    r"sglang\.deploy\.plugins\.module_utils(?:\.([a-z_][a-z0-9_]*)|\s+import\s+([a-z_, ]+))"
)


def yaml_files(root: Path) -> Iterator[Path]:
    for path in sorted(root.rglob("*")):
        if path.is_file() and path.suffix in (".yml", ".yaml"):
            yield path


def lines(path: Path) -> int:
    return len(path.read_text(encoding="utf-8", errors="replace").splitlines())


def iter_tasks(items: Any) -> Iterator[dict[str, Any]]:
    """Every task of a task list, the children of block/rescue/always included (not the block)."""
    if not isinstance(items, list):
        return
    for item in items:
        if not isinstance(item, dict):
            continue
        if any(key in item for key in ("block", "rescue", "always")):
            for key in ("block", "rescue", "always"):
                yield from iter_tasks(item.get(key))
            continue
        yield item


def action_of(task: dict[str, Any]) -> str:
    """The task's module, short name (ansible.builtin.set_fact -> set_fact)."""
    for key in ("action", "local_action"):
        if key in task:
            value = task[key]
            name = value.get("module", "") if isinstance(value, dict) else str(value).split()[0]
            return str(name).rsplit(".", 1)[-1]
    for key in task:
        if key not in TASK_KEYWORDS and not key.startswith("with_"):
            return str(key).rsplit(".", 1)[-1]
    return "?"


def count_tasks(paths: list[Path]) -> dict[str, int]:
    counts = {"tasks": 0, **dict.fromkeys(BOOKKEEPING, 0)}
    for path in paths:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
        for task in iter_tasks(data):
            counts["tasks"] += 1
            action = action_of(task)
            for group, actions in BOOKKEEPING.items():
                if action in actions:
                    counts[group] += 1
    return counts


def playbook_tasks(paths: list[Path]) -> list[dict[str, Any]]:
    """The tasks of plays (pre_tasks, tasks, post_tasks, handlers; import_playbook counts as one)."""
    found: list[dict[str, Any]] = []
    for path in paths:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
        if not isinstance(data, list):
            continue
        for play in data:
            if not isinstance(play, dict):
                continue
            if "import_playbook" in play or "ansible.builtin.import_playbook" in play:
                found.append(play)
                continue
            for key in ("pre_tasks", "tasks", "post_tasks", "handlers"):
                found.extend(iter_tasks(play.get(key)))
    return found


def plugin_index(repo: Path) -> dict[str, set[Path]]:
    """FQCN short name -> the plugin files defining it (filters and tests by their map, the rest by file)."""
    index: dict[str, set[Path]] = {}
    plugins = repo / "plugins"
    for kind in ("filter", "test"):
        for path in sorted((plugins / kind).glob("*.py")):
            tree = ast.parse(path.read_text(encoding="utf-8"))
            for node in ast.walk(tree):
                if isinstance(node, ast.FunctionDef) and node.name in ("filters", "tests"):
                    for sub in ast.walk(node):
                        if isinstance(sub, ast.Dict):
                            for key in sub.keys:
                                if isinstance(key, ast.Constant) and isinstance(key.value, str):
                                    index.setdefault(key.value, set()).add(path)
    for kind in ("modules", "lookup", "callback", "action", "inventory", "connection"):
        for path in sorted((plugins / kind).glob("*.py")):
            index.setdefault(path.stem, set()).add(path)
    return index


def with_module_utils(repo: Path, files: set[Path]) -> set[Path]:
    """The files plus the module_utils they import, transitively."""
    utils = repo / "plugins" / "module_utils"
    todo, seen = list(files), set(files)
    while todo:
        text = todo.pop().read_text(encoding="utf-8")
        for dotted, listed in MODULE_UTILS.findall(text):
            names = [dotted] if dotted else [n.strip() for n in listed.split(",")]
            for name in names:
                path = utils / f"{name}.py"
                if name and path.is_file() and path not in seen:
                    seen.add(path)
                    todo.append(path)
    return seen


def role_row(repo: Path, role: Path, index: dict[str, set[Path]]) -> tuple[dict[str, Any], set[Path]]:
    task_files = [p for sub in ("tasks", "handlers") if (role / sub).is_dir() for p in yaml_files(role / sub)]
    counts = {**count_tasks(task_files), "files": len(task_files)}
    own_yaml = [p for p in yaml_files(role) if "molecule" not in p.relative_to(role).parts]
    mol_yaml = list(yaml_files(role / "molecule")) if (role / "molecule").is_dir() else []
    py_all = sorted(role.rglob("*.py"))
    own_py = {p for p in py_all if "molecule" not in p.relative_to(role).parts}
    test_py = [p for p in py_all if "molecule" in p.relative_to(role).parts]
    called: set[Path] = set()
    sources = [
        p
        for p in role.rglob("*")
        if p.is_file()
        and "molecule" not in p.relative_to(role).parts
        and p.suffix in (".yml", ".yaml", ".j2")
    ]
    texts = [p.read_text(encoding="utf-8", errors="replace") for p in sources]
    for text in texts:
        for name in FQCN.findall(text):
            called |= index.get(name, set())
    runtime = with_module_utils(repo, called) | own_py
    row = {
        "role": role.name,
        **counts,
        "yaml": sum(map(lines, own_yaml)),
        "yaml_mol": sum(map(lines, mol_yaml)),
        "py": sum(map(lines, runtime)),
        "py_test": sum(map(lines, test_py)),
        "py_files": sorted(str(p.relative_to(repo)) for p in runtime),
    }
    return row, runtime


def share(row: dict[str, Any]) -> str:
    book = sum(int(row[group]) for group in BOOKKEEPING)
    return f"{100.0 * book / row['tasks']:.0f}%" if row["tasks"] else "-"


def stats(repo: Path) -> list[dict[str, Any]]:
    index = plugin_index(repo)
    rows: list[dict[str, Any]] = []
    every_py: set[Path] = set()
    for role in sorted(p for p in (repo / "roles").iterdir() if (p / "tasks").is_dir()):
        row, runtime = role_row(repo, role, index)
        rows.append(row)
        every_py |= runtime
    books = [repo / "site.yml", *yaml_files(repo / "playbooks")]
    books = [p for p in books if p.is_file() and not p.is_symlink()]
    plays_dir = repo / "playbooks" / "tasks"
    included = list(yaml_files(plays_dir)) if plays_dir.is_dir() else []
    play = {"tasks": 0, **dict.fromkeys(BOOKKEEPING, 0), "files": len(included)}
    for task in playbook_tasks(books):
        play["tasks"] += 1
        action = action_of(task)
        for group, actions in BOOKKEEPING.items():
            if action in actions:
                play[group] += 1
    rows.append({"role": "(playbooks)", **play, "yaml": sum(map(lines, books)), "yaml_mol": 0,
                 "py": 0, "py_test": 0, "py_files": []})  # fmt: skip
    total: dict[str, Any] = {"role": "TOTAL"}
    for key in ("tasks", "files", *BOOKKEEPING, "yaml", "yaml_mol", "py_test"):
        total[key] = sum(int(r[key]) for r in rows)
    total["py"] = sum(map(lines, every_py))  # each file once
    total["py_files"] = []
    rows.append(total)
    return rows


def table(rows: list[dict[str, Any]]) -> str:
    head = ("role", "tasks", "files", "book%", "set_fact", "assert/fail", "debug", "include", "meta", "yaml",
            "yaml_mol", "py", "py_test")  # fmt: skip
    body = [
        (r["role"], r["tasks"], r["files"], share(r), r["set_fact"], r["assert"], r["debug"], r["include"],
         r["meta"], r["yaml"], r["yaml_mol"], r["py"], r["py_test"])
        for r in rows
    ]  # fmt: skip
    widths = [max(len(str(x)) for x in col) for col in zip(head, *body, strict=True)]
    out = []
    for line in (head, *body):
        cells = [
            str(c).ljust(w) if i == 0 else str(c).rjust(w)
            for i, (c, w) in enumerate(zip(line, widths, strict=True))
        ]
        out.append("  ".join(cells).rstrip())
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("repo", nargs="?", type=Path, default=Path(__file__).resolve().parents[1])
    parser.add_argument(
        "--json", action="store_true", help="one JSON document (rows with their Python files)"
    )
    args = parser.parse_args(argv)
    repo = args.repo.resolve()
    if not (repo / "roles").is_dir():
        print(f"{repo}: no roles/ here", file=sys.stderr)
        return 1
    rows = stats(repo)
    if args.json:
        print(json.dumps({"repo": str(repo), "rows": rows}, indent=2))
    else:
        print(table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
