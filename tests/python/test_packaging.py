# SPDX-License-Identifier: Apache-2.0
"""Installing the package: `pip install ./worker/python` offline into a venv that sees
Debian's packages, and `cmake --install` into a prefix. Each install is then imported from
outside the checkout, with no RING_LIBRARY, and runs a collective. And the wheel: its
name, platform tag and contents."""
import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile

import pytest

SRC = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "worker", "python")
PROBE = ("import numpy, ringmaster as rm; rm.init(); "
         "print(rm.library_path); print(rm.allreduce(numpy.ones(2), op=rm.Sum).tolist())")


def clean_env(**extra):
    env = {k: v for k, v in os.environ.items() if k not in ("RING_LIBRARY", "PYTHONPATH") and not k.startswith("RING_")}
    env.update(extra)
    return env


def test_pip_install_offline(tmp_path):
    venv = tmp_path / "venv"
    r = subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)], capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip("python3 -m venv does not work here (python3-venv): " + r.stderr[-200:])
    # A copy, so that pip's in-place build leaves the checkout clean.
    shutil.copytree(SRC, tmp_path / "src", ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"))
    # PEP 517 offline: the build uses the setuptools and wheel installed (Debian's), not
    # ones fetched into an isolated environment.
    r = subprocess.run([str(venv / "bin" / "pip"), "install", "--no-index", "--no-build-isolation",
                        str(tmp_path / "src")],
                       env=dict(clean_env(), RING_LIBRARY=os.environ["RING_LIBRARY"]), capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    r = subprocess.run([str(venv / "bin" / "python"), "-c", PROBE], env=clean_env(), cwd=str(tmp_path),
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    lib, result = r.stdout.split("\n")[:2]
    assert lib.startswith(str(venv)) and lib.endswith("ringmaster/libring.so.0"), lib
    assert result == "[1.0, 1.0]"


def test_wheel_is_platform_tagged_and_carries_libring(tmp_path):
    """`pip wheel` offline makes ringmaster_hpc-<v>-py3-none-<platform>.whl: the distribution
    name PyPI does not have yet (ringmaster is taken), the import name ringmaster, and the
    build's libring.so inside as ringmaster/libring.so.0, in the wheel's root (platlib)."""
    shutil.copytree(SRC, tmp_path / "src", ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"))
    r = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-index", "--no-build-isolation", "--no-deps",
                        "--no-cache-dir", "-w", str(tmp_path / "dist"), str(tmp_path / "src")],
                       env=dict(clean_env(), RING_LIBRARY=os.environ["RING_LIBRARY"]), capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    platform = sysconfig.get_platform().replace("-", "_").replace(".", "_")
    wheels = os.listdir(tmp_path / "dist")
    assert wheels == ["ringmaster_hpc-0.1.0-py3-none-%s.whl" % platform], wheels
    with zipfile.ZipFile(tmp_path / "dist" / wheels[0]) as z:
        names = set(z.namelist())
        info = "ringmaster_hpc-0.1.0.dist-info/"
        wheel = z.read(info + "WHEEL").decode()
        meta = z.read(info + "METADATA").decode()
        lib = z.read("ringmaster/libring.so.0")
    assert {"ringmaster/__init__.py", "ringmaster/client.py", "ringmaster/torch/__init__.py"} <= names, names
    assert "Root-Is-Purelib: false" in wheel and "Tag: py3-none-%s" % platform in wheel, wheel
    assert "Name: ringmaster-hpc" in meta and "Requires-Dist: numpy" in meta, meta
    with open(os.path.realpath(os.environ["RING_LIBRARY"]), "rb") as f:
        assert lib == f.read(), "the wheel's libring.so.0 is not the build's libring.so"


def test_cmake_install(tmp_path):
    build = os.environ.get("RING_BUILD_DIR")
    if not build or not shutil.which("cmake"):
        pytest.skip("needs RING_BUILD_DIR (ctest sets it) and cmake")
    r = subprocess.run(["cmake", "--install", build, "--prefix", str(tmp_path)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    site = [d for d in (tmp_path / "lib").iterdir() if d.name.startswith("python3")]
    assert len(site) == 1, list((tmp_path / "lib").iterdir())
    pkg = site[0] / "dist-packages"
    r = subprocess.run([sys.executable, "-c", PROBE], env=clean_env(PYTHONPATH=str(pkg)), cwd=str(tmp_path),
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split("\n")[:2] == [str(tmp_path / "lib" / "libring.so.0"), "[1.0, 1.0]"]
    assert os.access(tmp_path / "bin" / "ringrun", os.X_OK) and (tmp_path / "include" / "ring.h").exists()


@pytest.mark.parametrize("code,missing", [("import ringmaster; ringmaster.init()", "numpy"),
                                          ("from ringmaster import allreduce", "numpy"),
                                          ("import ringmaster.torch", "torch")])
def test_a_python_without_debians_packages_says_which_python(code, missing):
    """A python3 that does not see Debian's dist-packages (the pyenv one first on PATH, here
    `-S`) cannot import numpy or torch: the first use of the worker side must say to use
    /usr/bin/python3, not only 'No module named numpy' once per rank."""
    r = subprocess.run([sys.executable, "-S", "-c", code], env=clean_env(PYTHONPATH=SRC),
                       capture_output=True, text=True, timeout=60)
    assert r.returncode != 0
    assert "No module named '%s'" % missing in r.stderr, r.stderr
    assert "/usr/bin/python3" in r.stderr, r.stderr


def test_the_rest_client_needs_neither_numpy_nor_libring():
    """ringmaster.client runs where only the standard library is (-S: no dist-packages) and
    no libring.so can be found: importing it loads nothing of the worker side."""
    code = ("import sys, ringmaster, ringmaster.client as c; "
            "print(c.Client('127.0.0.1:9').url, 'numpy' in sys.modules, 'ringmaster._library' in sys.modules, "
            "'allreduce' in dir(ringmaster))")
    r = subprocess.run([sys.executable, "-S", "-c", code],
                       env=clean_env(PYTHONPATH=SRC, RING_LIBRARY="/nonexistent/libring.so"),
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["http://127.0.0.1:9", "False", "False", "True"]
