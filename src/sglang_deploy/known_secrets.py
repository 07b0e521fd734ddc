"""Learn the secret values a run will use before it starts, with Ansible's own loaders.

Vault-encrypted files (`-e @vault.yml`, inventory group_vars/host_vars) and inline `!vault` values
are decrypted in memory with the run's vault password files through `DataLoader` (no hand-written
vault parsing), the inventory's variables are merged per host by `InventoryManager` +
`VariableManager` exactly as ansible-playbook merges them (inventory file, group_vars/host_vars next
to the inventory and next to the playbook). The values found under secret-named keys (`SECRET_NAME`)
and every inline `!vault` value go to the Redactor; nothing decrypted is written anywhere.

Learning is best effort: what cannot be read or decrypted here cannot be read by ansible-playbook
either (it reports the error itself), so a failure here only skips that source."""

from __future__ import annotations

import contextlib
import io
from collections.abc import Iterator, Mapping
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
from ansible.vars.manager import VariableManager  # type: ignore[import-untyped]

from .redact import SECRET_NAME, looks_like_secret

_TEMPLATE_MARKERS = ("{{", "{%")


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """Ansible's Display prints inventory warnings of this in-process parse to our stdout/stderr:
    ansible-playbook prints them again in the run (through the redactor), so drop them here."""
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        yield


class VarsReader:
    """A DataLoader that knows the run's vault secrets, plus the walk that picks secrets out."""

    def __init__(self, vault_password_files: tuple[Path, ...] = ()) -> None:
        self.loader = DataLoader()
        self.passwords: list[str] = []
        files = [str(path.expanduser().resolve()) for path in vault_password_files]
        # ansible-playbook also uses the configured default (ANSIBLE_VAULT_PASSWORD_FILE / ansible.cfg)
        default = ansible_constants.DEFAULT_VAULT_PASSWORD_FILE
        if default and str(default) not in files:
            files.append(str(Path(str(default)).expanduser()))
        vault_secrets: list[tuple[str, Any]] = []
        for filename in files:
            try:
                secret = get_file_vault_secret(
                    filename=filename, vault_id=ansible_constants.DEFAULT_VAULT_IDENTITY, loader=self.loader
                )
                secret.load()
            except (AnsibleError, OSError):
                continue  # ansible-playbook reports a missing or broken password file itself
            vault_secrets.append((ansible_constants.DEFAULT_VAULT_IDENTITY, secret))
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

    def secret_values(self, data: Any, under_secret: bool = False) -> Iterator[str]:
        """Leaf values under secret-named keys that look like a secret (`looks_like_secret`: not a
        path, not a short flag), and every inline `!vault` value (secret by intent). Unrendered
        templates (`"{{ vault_api_key }}"`) are references, not values: skipped."""
        if isinstance(data, EncryptedString):
            plaintext = self._decrypt(data)
            if plaintext is not None:
                yield plaintext
        elif isinstance(data, Mapping):
            for key, value in data.items():
                yield from self.secret_values(value, under_secret or bool(SECRET_NAME.search(str(key))))
        elif isinstance(data, list | tuple):
            for value in data:
                yield from self.secret_values(value, under_secret)
        elif under_secret and data is not None and not isinstance(data, bool):
            text = str(data)
            if looks_like_secret(text) and not any(marker in text for marker in _TEMPLATE_MARKERS):
                yield text

    def from_file(self, path: Path) -> list[str]:
        """Secrets of a vars file (`-e @file`): plain YAML/JSON, whole-file vault, or `!vault` values."""
        try:
            with _quiet():
                data = self.loader.load_from_file(str(path), cache="none")
            return list(self.secret_values(data))
        except (AnsibleError, OSError, UnicodeDecodeError):
            return []

    def from_inventory(self, inventory: Path, playbook_dir: Path) -> list[str]:
        """Secrets of every host's merged inventory variables (the inventory file or directory,
        group_vars/host_vars next to it and next to the playbook), implicit localhost included."""
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
                return found
            for host in hosts:
                if host is None:
                    continue
                try:
                    found += self.secret_values(variables.get_vars(host=host, include_hostvars=False))
                except AnsibleError:
                    continue  # e.g. a vault file of this host we cannot decrypt: ansible fails on it too
        return found
