# SPDX-License-Identifier: Apache-2.0
"""Installs the ringmaster package (pure Python; ctypes binds libring.so).

    pip install ./worker/python          (in a venv made with --system-site-packages, so
                                          that Debian's python3-torch stays visible)

Works offline with Debian's setuptools: there is no pyproject.toml, so pip builds in place
without fetching a build environment. The libring.so of $RING_LIBRARY, or else of the
checkout's build tree (build/worker/libring), is copied into the package as libring.so.0,
so the installed package needs no environment; without either, it finds libring.so at run
time through the system loader (install it with `cmake --install`).
"""
import os
import shutil

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = os.path.dirname(os.path.abspath(__file__))


def built_library():
    env = os.environ.get("RING_LIBRARY")
    if env:
        if not os.path.exists(env):
            raise SystemExit("setup.py: RING_LIBRARY=%s does not exist" % env)
        return env
    tree = os.path.join(HERE, "..", "..", "build", "worker", "libring", "libring.so")
    return tree if os.path.exists(tree) else None


class BuildWithLibrary(build_py):
    def run(self):
        super().run()
        lib = built_library()
        dest = os.path.join(self.build_lib, "ringmaster", "libring.so.0")
        if lib is None:
            print("setup.py: no libring.so found (RING_LIBRARY, build/); ringmaster will look for it "
                  "through the system loader at run time")
        elif not self.dry_run:
            shutil.copyfile(os.path.realpath(lib), dest)
            print("setup.py: bundled %s as ringmaster/libring.so.0" % os.path.realpath(lib))


setup(
    name="ringmaster",
    version="0.1.0",
    description="Python and PyTorch bindings of libring, Ringmaster's collective runtime",
    license="Apache-2.0",
    packages=["ringmaster", "ringmaster.torch"],
    python_requires=">=3.9",
    install_requires=["numpy"],
    cmdclass={"build_py": BuildWithLibrary},
    zip_safe=False,
)
