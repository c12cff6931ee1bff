# SPDX-License-Identifier: Apache-2.0
"""Builds the ringmaster package (ringmaster-hpc, see pyproject.toml) with libring.so in it.

    pip install --no-build-isolation ./worker/python   (in a venv made with
                                          --system-site-packages, so that Debian's
                                          python3-torch stays visible)
    pip wheel --no-build-isolation --no-deps ./worker/python

The metadata is in pyproject.toml; this file adds the two things no static field says. The
libring.so of $RING_LIBRARY, or else of the checkout's build tree (build/worker/libring), is
copied into the package as libring.so.0, so the installed package needs no environment;
without either, it finds libring.so at run time through the system loader (install it with
`cmake --install`). And the wheel that carries that library is tagged for this platform:
py3-none-<platform>, since ctypes loads the library (no CPython ABI), but it runs only on
the platform it was built for.
"""
import os
import shutil

from setuptools import Distribution, setup
from setuptools.command.build_py import build_py

try:
    from wheel.bdist_wheel import bdist_wheel
except ImportError:  # building without a wheel: pip install from an sdist or the tree
    bdist_wheel = None

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


class BinaryDistribution(Distribution):
    """With libring.so bundled, the package is built and installed as platform-specific
    (platlib): it says it has extension modules, as libring.so is one to the loader."""

    def has_ext_modules(self):
        return built_library() is not None


cmdclass = {"build_py": BuildWithLibrary}

if bdist_wheel is not None:
    class PlatformWheel(bdist_wheel):
        """py3-none-<platform> rather than cp3X-cp3X-<platform>: no CPython ABI is used."""

        def get_tag(self):
            python, abi, plat = super().get_tag()
            return (python, abi, plat) if self.root_is_pure else ("py3", "none", plat)

    cmdclass["bdist_wheel"] = PlatformWheel

setup(cmdclass=cmdclass, distclass=BinaryDistribution)
