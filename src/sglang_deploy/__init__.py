"""sglang-deploy: Ansible roles + a thin ansible-runner front end for a tuned SGLang stack."""

__version__ = "0.1.0"
