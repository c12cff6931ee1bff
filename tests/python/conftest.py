# SPDX-License-Identifier: Apache-2.0
"""Shared by the pytest suites. The multi-rank suites run as `ringrun -np N python3 -m
pytest FILE`: every rank runs the same tests in the same order, so each test's collectives
meet across ranks. Skips depend on the world size only, never on the rank."""
import os

import pytest


@pytest.fixture(scope="session")
def rm():
    import ringmaster

    ringmaster.init()
    yield ringmaster


@pytest.fixture(scope="session")
def hvd():
    import ringmaster.torch as hvd

    hvd.init()
    yield hvd


def world():
    return int(os.environ.get("RING_RANK", 0)), int(os.environ.get("RING_SIZE", 1))
