"""Learn the secret values a run will use before it starts, with Ansible's own loaders.

Vault-encrypted files (`-e @vault.yml`, inventory group_vars/host_vars) and inline `!vault` values
are decrypted in memory with the run's vault secrets through `DataLoader` and Ansible's VaultSecret
classes (no hand-written vault parsing): `--vault-password-file`s, `--vault-id [LABEL@]SOURCE`s
(labelled secrets, password scripts included) and the configured defaults, as ansible-playbook
takes them. The inventory's variables are merged per host by `InventoryManager` + `VariableManager`
exactly as ansible-playbook merges them (inventory file, group_vars/host_vars next to the inventory
and next to the playbook), with the extra vars on top. The values found under secret-named keys
(`SECRET_NAME`) and every inline `!vault` value go to the Redactor; a secret-named value that is a
template (`sglang_api_key: "{{ vault_sglang_key }}"`) is rendered with Ansible's Templar against the
same variables and the result learned. Nothing decrypted or rendered is written anywhere.

Rendering runs no lookup with side effects: only the read-only lookups of `SAFE_LOOKUPS` (env,
file, unvault, vars) run; a template that needs another one (`pipe`, `password`, a secret store)
is not rendered here, and its value is masked only by the patterns of redact.py.

Learning is best effort: what cannot be read or decrypted here cannot be read by ansible-playbook
either (it reports the error itself), so a failure here only skips that source."""

from __future__ import annotations

import contextlib
import io
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import ansible.constants as ansible_constants  # type: ignore[import-untyped]
from ansible.errors import AnsibleError  # type: ignore[import-untyped]
from ansible.inventory.manager import InventoryManager  # type: ignore[import-untyped]
from ansible.parsing.dataloader import DataLoader  # type: ignore[import-untyped]
from ansible.parsing.vault import (  # type: ignore[import-untyped]
    EncryptedString,
    VaultHelper,
    VaultLib,
    get_file_vault_secret,
)
from ansible.plugins.loader import init_plugin_loader  # type: ignore[import-untyped]
from ansible.template import Templar  # type: ignore[import-untyped]
from ansible.utils.collection_loader import AnsibleCollectionConfig  # type: ignore[import-untyped]
from ansible.utils.vars import combine_vars  # type: ignore[import-untyped]
from ansible.vars.manager import VariableManager  # type: ignore[import-untyped]

from .redact import SECRET_NAME, looks_like_secret

_TEMPLATE_MARKERS = ("{{", "{%")
PROMPT_SOURCES = ("prompt", "prompt_ask_vault_pass")  # --vault-id LABEL@prompt: asks on a terminal
# read-only lookups a secret's template may use while it is rendered for learning
SAFE_LOOKUPS = frozenset(
    name for short in ("env", "file", "unvault", "vars") for name in (short, f"ansible.builtin.{short}")
)


def split_vault_id(vault_id: str) -> tuple[str | None, str]:
    """`LABEL@SOURCE` -> (LABEL, SOURCE), `SOURCE` -> (None, SOURCE): ansible's own rule (the first
    `@` separates; a source may contain more)."""
    if "@" not in vault_id:
        return None, vault_id
    label, source = vault_id.split("@", 1)
    return label, source


def _is_template(value: Any) -> bool:
    return isinstance(value, str) and any(marker in value for marker in _TEMPLATE_MARKERS)


def _collections() -> None:
    """Ansible's collection loader, as ansible-playbook installs it at start: FQCN plugins
    (`ansible.builtin.env`, collection filters) resolve in a rendered template only with it."""
    if AnsibleCollectionConfig.collection_finder is None:
        init_plugin_loader()


def _guarded(lookup: Callable[..., Any]) -> Callable[..., Any]:
    def guard(plugin_name: str, /, *args: Any, **kwargs: Any) -> Any:
        if plugin_name not in SAFE_LOOKUPS:
            raise AnsibleError(f"lookup {plugin_name!r} is not run while learning secrets")
        return lookup(plugin_name, *args, **kwargs)

    return guard


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """Ansible's Display prints inventory warnings of this in-process parse to our stdout/stderr:
    ansible-playbook prints them again in the run (through the redactor), so drop them here."""
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        yield


class VarsReader:
    """A DataLoader that knows the run's vault secrets, plus the walk that picks secrets out."""

    def __init__(self, vault_password_files: tuple[Path, ...] = (), vault_ids: tuple[str, ...] = ()) -> None:
        self.loader = DataLoader()
        self.passwords: list[str] = []
        # ansible-playbook's order: configured identities, --vault-id's, --vault-password-file's, and
        # the configured default password file (ANSIBLE_VAULT_PASSWORD_FILE / ansible.cfg)
        sources = [
            split_vault_id(str(v)) for v in (*ansible_constants.DEFAULT_VAULT_IDENTITY_LIST, *vault_ids)
        ]
        files = [str(path.expanduser().resolve()) for path in vault_password_files]
        default = ansible_constants.DEFAULT_VAULT_PASSWORD_FILE
        if default and str(default) not in files:
            files.append(str(Path(str(default)).expanduser()))
        sources += [(None, filename) for filename in files]
        vault_secrets: list[tuple[str, Any]] = []
        for label, source in sources:
            if source in PROMPT_SOURCES:
                continue  # nobody answers a prompt here (the CLI refuses `--vault-id LABEL@prompt`)
            vault_id = label or ansible_constants.DEFAULT_VAULT_IDENTITY
            try:
                secret = get_file_vault_secret(
                    filename=str(Path(source).expanduser()), vault_id=vault_id, loader=self.loader
                )
                secret.load()
            except (AnsibleError, OSError):
                continue  # ansible-playbook reports a missing or broken password source itself
            vault_secrets.append((vault_id, secret))
            # as ansible-playbook does: a later password file may itself be encrypted with an earlier one
            self.loader.set_vault_secrets(vault_secrets)
            if secret.bytes:
                self.passwords.append(bytes(secret.bytes).decode("utf-8", "replace").strip())
        self.loader.set_vault_secrets(vault_secrets)
        self._vault = VaultLib(secrets=vault_secrets)

    def _decrypt(self, value: Any) -> str | None:
        ciphertext = VaultHelper.get_ciphertext(value, with_tags=False)
        if not ciphertext:
            return None
        try:
            plaintext: bytes = self._vault.decrypt(ciphertext)
        except AnsibleError:
            return None
        return plaintext.decode("utf-8", "replace")

    def secret_values(self, data: Any, under_secret: bool = False, name: str = "") -> Iterator[str]:
        """Leaf values under secret-named keys that look like a secret (`looks_like_secret`: not a
        short flag, not a path held by a location-named variable such as `*_file`), and every inline
        `!vault` value (secret by intent). Unrendered templates (`"{{ vault_api_key }}"`) are
        references, not values: skipped here, rendered by `resolved_secrets`."""
        if isinstance(data, EncryptedString):
            plaintext = self._decrypt(data)
            if plaintext is not None:
                yield plaintext
        elif isinstance(data, Mapping):
            for key, value in data.items():
                is_secret = under_secret or bool(SECRET_NAME.search(str(key)))
                yield from self.secret_values(value, is_secret, str(key) if is_secret else "")
        elif isinstance(data, list | tuple):
            for value in data:
                yield from self.secret_values(value, under_secret, name)
        elif under_secret and data is not None and not isinstance(data, bool):
            text = str(data)
            if looks_like_secret(text, name) and not _is_template(text):
                yield text

    def _secret_templates(
        self, data: Any, under_secret: bool = False, name: str = ""
    ) -> Iterator[tuple[str, Any]]:
        """(name, template) of every template string under a secret-named key."""
        if isinstance(data, Mapping):
            for key, value in data.items():
                is_secret = under_secret or bool(SECRET_NAME.search(str(key)))
                yield from self._secret_templates(value, is_secret, str(key) if is_secret else "")
        elif isinstance(data, list | tuple):
            for value in data:
                yield from self._secret_templates(value, under_secret, name)
        elif under_secret and _is_template(data):
            yield name, data

    def _plain(self, data: Any) -> Any:
        """The variables with every `!vault` value decrypted (in memory): the Templar renders
        references to them without Ansible's process-wide vault context; strings keep their tags
        (trusted as templates where Ansible's loaders trusted them)."""
        if isinstance(data, EncryptedString):
            plaintext = self._decrypt(data)
            return data if plaintext is None else plaintext
        if isinstance(data, Mapping):
            return {key: self._plain(value) for key, value in data.items()}
        if isinstance(data, list):
            return [self._plain(value) for value in data]
        return data

    def resolved_secrets(self, variables: Mapping[str, Any]) -> list[str]:
        """The secret-named values that are templates, rendered with Ansible's Templar against
        `variables` (`sglang_api_key: "{{ vault_sglang_key }}"` -> the key, whatever the name it
        goes through), lookups limited to SAFE_LOOKUPS. A template that cannot be rendered here (an
        undefined name, a play variable, a refused lookup) is skipped."""
        templates = list(self._secret_templates(variables))
        if not templates:
            return []
        _collections()
        plain = self._plain(variables)
        templar = Templar(loader=self.loader, variables=plain)
        # the engine's own Jinja globals (ansible-core 2.19 keeps them per Templar): lookup/query
        # through a guard that refuses lookups with side effects
        env_globals = templar._engine.environment.globals
        for function in ("lookup", "query", "q"):
            env_globals[function] = _guarded(env_globals[function])
        found: list[str] = []
        for name, template in templates:
            try:
                with _quiet():
                    rendered = templar.template(template)
            except Exception:  # any failure of a render: this value is not learned
                continue
            found += self.secret_values(rendered, under_secret=True, name=name)
        return found

    def load(self, path: Path) -> Any:
        """A vars file as ansible-playbook loads `-e @file` (trusted as templates); None when it
        cannot be read or decrypted."""
        try:
            with _quiet():
                return self.loader.load_from_file(str(path), cache="none", trusted_as_template=True)
        except (AnsibleError, OSError, UnicodeDecodeError):
            return None

    def from_file(self, path: Path) -> list[str]:
        """Secrets of a vars file (`-e @file`): plain YAML/JSON, whole-file vault, or `!vault` values."""
        data = self.load(path)
        return [] if data is None else list(self.secret_values(data))

    def from_inventory(
        self, inventory: Path, playbook_dir: Path, extra_vars: Mapping[str, Any] | None = None
    ) -> list[str]:
        """Secrets of every host's merged inventory variables (the inventory file or directory,
        group_vars/host_vars next to it and next to the playbook), implicit localhost included, and
        the secret-named templates rendered against those variables with `extra_vars` on top."""
        extra = dict(extra_vars or {})
        found: list[str] = []
        with _quiet():
            try:
                self.loader.set_basedir(str(playbook_dir))
                manager = InventoryManager(loader=self.loader, sources=[str(inventory)])
                variables = VariableManager(loader=self.loader, inventory=manager)
                variables.safe_basedir = True  # group_vars/host_vars next to the playbook too
                hosts = list(manager.get_hosts())
                if not any(host.name == "localhost" for host in hosts):
                    hosts.append(manager.get_host("localhost"))  # implicit localhost
            except AnsibleError:
                return self.resolved_secrets(extra)
            for host in hosts:
                if host is None:
                    continue
                try:
                    host_vars = variables.get_vars(host=host, include_hostvars=False)
                except AnsibleError:
                    continue  # e.g. a vault file of this host we cannot decrypt: ansible fails on it too
                found += self.secret_values(host_vars)
                found += self.resolved_secrets(combine_vars(host_vars, extra))
        return found
