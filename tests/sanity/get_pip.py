"""ansible-test's pip bootstrap, without a download: pip from CPython's own ``ensurepip``, then
``pip install <the arguments ansible-test passes>`` (``pip==<its version>``) with this machine's pip
configuration (index, CA). ansible-test creates each sanity venv ``--without-pip`` and runs
``get-pip.py`` from ``~/.ansible/test/cache/get_pip_<version>.py``, downloading it from a host of its
own when absent (unreachable here); ``scripts/sanity`` puts this file there instead.
``ensurepip`` sets ``PIP_CONFIG_FILE=/dev/null`` in the environment and leaves it: removed here, or
the install that follows would ignore the machine's index and CA."""

import ensurepip
import os
import subprocess
import sys

GET_PIP_ONLY = {"--no-setuptools", "--no-wheel"}  # get-pip.py's own options: leave those packages out

ensurepip.bootstrap(upgrade=True)
os.environ.pop("PIP_CONFIG_FILE", None)
args = [arg for arg in sys.argv[1:] if arg not in GET_PIP_ONLY]
rc = subprocess.call([sys.executable, "-m", "pip", "install", *args])
if rc == 0 and "--no-setuptools" in sys.argv:
    rc = subprocess.call([sys.executable, "-m", "pip", "uninstall", "-q", "-y", "setuptools"])
sys.exit(rc)
