"""SGLang's server argument parser, as far as preflight needs it without SGLang (issue 32 item 8).

:func:`parse_errors` reads a list of server words (``sglang_extra_args``) the way ``argparse`` reads them
in ``sglang.launch_server`` (``ServerArgs.add_cli_args``, ``allow_abbrev`` on), against the generated
table of SGLang's flags (plugins/module_utils/sglang_flags.py, scripts/gen-sglang-flags), and returns
argparse's own error for what it would refuse: ``unrecognized arguments: --foo``, ``ambiguous option:
--x could match --xa, --xb``, ``argument --port: expected one argument``, ``argument --tp-size: invalid
int value: 'x'``, ``argument --log-requests-format: invalid choice: 'xml' (choose from 'json', 'text')``,
``argument --enable-metrics: ignored explicit argument 'x'``.

The stack stage runs SGLang's real parser in the release (roles/sglang_stack/files/stack_check.py) and
stays the authoritative check; this one makes a typo fail in preflight, before CUDA and the stack are
installed. Pure Python (no Ansible import); tests/test_validation_extra_args.py tests it, against
SGLang's parser too where its venv exists.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from ansible_collections.sglang.deploy.plugins.module_utils.sglang_flags import FLAGS, SGLANG_VERSION

PROG = "sglang.launch_server"
_NEGATIVE = re.compile(r"-\d+|-\d*\.\d+")  # argparse's negative-number matcher (values, not options)


def _is_option(word: str) -> bool:
    """argparse's 'O' words: start with -, not a lone -, not a negative number, no space."""
    return word.startswith("-") and word != "-" and not _NEGATIVE.fullmatch(word) and " " not in word


def _resolve(name: str, flags: Mapping[str, Any]) -> tuple[str | None, str | None]:
    """(the option string argparse resolves ``name`` to, or None with the error)."""
    if name in flags:
        return name, None
    if name.startswith("--"):
        matches = [opt for opt in flags if opt.startswith("--") and opt.startswith(name)]
        if len(matches) == 1:
            return matches[0], None
        if len(matches) > 1:
            return None, f"ambiguous option: {name} could match {', '.join(matches)}"
    return None, ""


def _value_error(option: str, entry: Mapping[str, Any], value: str) -> str | None:
    kind = entry.get("type")
    shown = value
    if kind in ("int", "float"):
        try:
            shown = str(int(value) if kind == "int" else float(value))
        except ValueError:
            return f"argument {option}: invalid {kind} value: {value!r}"
    choices = entry.get("choices")
    if choices and shown not in choices and value not in choices:
        listed = ", ".join(repr(c) for c in choices)
        return f"argument {option}: invalid choice: {value!r} (choose from {listed})"
    return None


def _take(words: Sequence[str], start: int, nargs: str) -> tuple[int, str | None]:
    """How many value words follow an option of ``nargs`` from ``start``; the error when too few."""
    count = 0
    while start + count < len(words) and not _is_option(words[start + count]):
        count += 1  # "--" is an option word here (_is_option): it ends the values
    if nargs == "1":
        return (1, None) if count >= 1 else (0, "expected one argument")
    if nargs == "?":
        return min(count, 1), None
    if nargs == "+" and count == 0:
        return 0, "expected at least one argument"
    return count, None


def parse_errors(words: Sequence[str]) -> list[str]:
    """argparse's errors for ``words`` as SGLang's server options (empty: the parser accepts them)."""
    errors: list[str] = []
    unrecognized: list[str] = []
    i = 0
    while i < len(words):
        word = words[i]
        i += 1
        if word == "--":  # everything after is positional: SGLang takes none (argparse lists the -- too)
            unrecognized.extend(words[i - 1 :])
            break
        if not _is_option(word):
            unrecognized.append(word)
            continue
        name, eq, explicit = word.partition("=") if word.startswith("--") else (word, "", "")
        option, problem = _resolve(name, FLAGS)
        if option is None:
            if problem:
                errors.append(problem)
            else:
                unrecognized.append(word)
            continue
        entry = FLAGS[option]
        nargs = str(entry.get("nargs", "1"))
        if eq:
            if nargs == "0":
                errors.append(f"argument {option}: ignored explicit argument {explicit!r}")
                continue
            values = [explicit]
        else:
            if nargs == "0":
                continue
            count, problem = _take(words, i, nargs)
            if problem:
                errors.append(f"argument {option}: {problem}")
                continue
            values = list(words[i : i + count])
            i += count
        errors += [e for e in (_value_error(option, entry, v) for v in values) if e]
    if unrecognized:
        errors.append(f"unrecognized arguments: {' '.join(unrecognized)}")
    return errors


def describe(errors: Sequence[str]) -> list[str]:
    """Each error as SGLang's parser prints it (``PROG: error: ...``), naming the release it is from."""
    return [f"SGLang {SGLANG_VERSION}'s parser would refuse it: {PROG}: error: {e}" for e in errors]
