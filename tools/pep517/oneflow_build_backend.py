"""The PEP 517 build backend behind `pip install .` and `pip wheel .` (pyproject.toml names it):
it runs the same build as tools/build_wheel.sh, for the Python that runs pip.

    pip install .                      # from a checkout: builds and installs for this Python
    pip install git+file:///path/to/checkout
    pip wheel . -w dist                # the wheel only

It needs nothing from PyPI (no setuptools): the build is Bazel's, with the Debian packages
tools/install_deps.sh installs (as root, or through sudo). Bazel's output goes to pip's log
(`pip install -v .` shows it). An sdist is the checkout itself (build_sdist), so that
`pip install <path-or-url>` works the same from a copy.
"""

import io
import os
import subprocess
import sys
import tarfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _version():
    with open(os.path.join(ROOT, "oneflow", "python", "oneflow", "__init__.py")) as f:
        for line in f:
            if line.startswith("__version__ = "):
                return line.split('"')[1]
    raise RuntimeError("oneflow build backend: no __version__ in oneflow/python/oneflow/__init__.py")


def _build_env():
    """The caller's environment without what pip's isolated build adds: Bazel keys its C++
    actions on PATH, so pip's temporary bin folders on it would make every `pip install .`
    rebuild everything (and the next tools/python build again) instead of reusing the cache."""
    env = dict(os.environ)
    path = [p for p in env.get("PATH", "").split(os.pathsep) if "pip-build-env-" not in p]
    env["PATH"] = os.pathsep.join(path)
    for name in ("PYTHONPATH", "PYTHONNOUSERSITE", "PEP517_BUILD_BACKEND"):
        env.pop(name, None)
    return env


def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_sdist(config_settings=None):
    return []


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    if config_settings:
        raise RuntimeError(f"oneflow build backend: got config settings {sorted(config_settings)}, "
                           "but the build takes none")
    out = subprocess.run(
        [os.path.join(ROOT, "tools", "build_wheel.sh"), "--python", sys.executable,
         "--out", os.path.abspath(wheel_directory)],
        cwd=ROOT, stdout=subprocess.PIPE, text=True, env=_build_env())
    if out.returncode != 0:
        raise RuntimeError(f"oneflow build backend: tools/build_wheel.sh failed (exit {out.returncode};"
                           " its messages are above)")
    return os.path.basename(out.stdout.strip().splitlines()[-1])


def build_sdist(sdist_directory, config_settings=None):
    """The tracked files of the checkout (git ls-files), under oneflow-VERSION/."""
    name = f"oneflow-{_version()}"
    files = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, check=True,
                           stdout=subprocess.PIPE).stdout.decode().split("\0")
    path = os.path.join(sdist_directory, name + ".tar.gz")
    with tarfile.open(path, "w:gz") as tar:
        for rel in filter(None, files):
            if os.path.lexists(os.path.join(ROOT, rel)):
                tar.add(os.path.join(ROOT, rel), arcname=f"{name}/{rel}", recursive=False)
        info = tarfile.TarInfo(f"{name}/PKG-INFO")
        data = f"Metadata-Version: 2.1\nName: oneflow\nVersion: {_version()}\n".encode()
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    return os.path.basename(path)
