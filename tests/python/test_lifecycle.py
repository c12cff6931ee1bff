# SPDX-License-Identifier: Apache-2.0
"""One process: what happens before init() and after shutdown(), how the package finds
libring.so, bad environments, and the stop/resume helper (checkpoints, progress.json,
exit 75). Each case that needs a fresh process runs one."""
import json
import os
import shutil
import subprocess
import sys

import pytest

PY = sys.executable


def run(code, env=None, cwd=None):
    e = dict(os.environ)
    for k in [k for k in e if k.startswith("RING_") and k != "RING_LIBRARY"]:
        del e[k]
    e.update(env or {})
    return subprocess.run([PY, "-c", code], env=e, cwd=cwd, capture_output=True, text=True, timeout=60)


def test_not_initialized_then_initialized_then_shut_down():
    r = run("""
import numpy as np, ringmaster as rm
for f in (rm.rank, rm.size, rm.local_rank, rm.local_size, rm.cross_rank, rm.cross_size):
    try:
        f(); print("no error from", f.__name__)
    except rm.RingError as e:
        assert e.name == "RING_ENOTINIT" and "call init() first" in str(e), e
try:
    rm.allreduce(np.ones(2))
except rm.RingError as e:
    print("before:", e)
assert not rm.is_initialized()
rm.init(); rm.init()  # the second does nothing
assert rm.is_initialized() and (rm.rank(), rm.size()) == (0, 1)
print("np1:", rm.allreduce(np.arange(3.0), op=rm.Sum).tolist())
rm.shutdown(); rm.shutdown()
try:
    rm.allreduce(np.ones(2))
except rm.RingError as e:
    print("after:", e.code, e.name)
""")
    assert r.returncode == 0, r.stderr
    assert "no error" not in r.stdout
    assert "before: RING_ENOTINIT: allreduce: ringmaster is not initialized; call init() first" in r.stdout
    assert "np1: [0.0, 1.0, 2.0]" in r.stdout
    assert "after: -3 RING_ENOTINIT" in r.stdout


def test_pending_operations_fail_at_shutdown():
    r = run("""
import numpy as np, ringmaster as rm
rm.init()
h = rm.allgather_async(np.ones(2), name="late")
rm.shutdown()
try:
    print("result", rm.synchronize(h))
except rm.RingError as e:
    print("error", e.name)
""")
    assert r.returncode == 0, r.stderr
    assert "result [1. 1.]" in r.stdout or "error RING_ESHUTDOWN" in r.stdout


def test_bad_environment_is_an_error_with_its_reason():
    r = run("import ringmaster as rm\ntry:\n rm.init()\nexcept rm.RingError as e: print(e.name, e)",
            env={"RING_COMPRESSION": "zstd"})
    assert "RING_EENV" in r.stdout and "must be none, fp16 or bf16" in r.stdout, r.stdout + r.stderr
    r = run("import ringmaster as rm\ntry:\n rm.init(compression='lz4')\nexcept ValueError as e: print(e)")
    assert "compression must be" in r.stdout
    r = run("import ringmaster as rm\nrm.init(compression='fp16')\nfrom ringmaster import basics\n"
            "print(basics.wire_compression())")
    assert r.stdout.strip() == "fp16", r.stderr


def test_finding_libring(tmp_path):
    r = run("import ringmaster; ringmaster.init()", env={"RING_LIBRARY": str(tmp_path / "nope.so")})
    assert r.returncode != 0 and "RING_LIBRARY=%s does not load" % (tmp_path / "nope.so") in r.stderr
    # A copy of the package with libring.so.0 next to it loads that one.
    import ringmaster

    pkg = tmp_path / "site" / "ringmaster"
    shutil.copytree(os.path.dirname(ringmaster.__file__), pkg, ignore=shutil.ignore_patterns("__pycache__", "_install.py"))
    shutil.copy(ringmaster.library_path, pkg / "libring.so.0")
    env = {"PYTHONPATH": str(tmp_path / "site"), "RING_LIBRARY": ""}
    r = run("import ringmaster; print(ringmaster.library_path)", env=env, cwd=str(tmp_path))
    assert r.stdout.strip() == str(pkg / "libring.so.0"), r.stderr
    # Without it, and outside a checkout, the message says what to do.
    os.remove(pkg / "libring.so.0")
    r = run("import ringmaster; ringmaster.init()", env=dict(env, LD_LIBRARY_PATH=""), cwd=str(tmp_path))
    if r.returncode != 0:  # unless libring is installed system-wide
        assert "cannot find libring.so" in r.stderr and "RING_LIBRARY" in r.stderr


def test_resumable_saves_atomically_and_restores(tmp_path):
    r = run("""
import ringmaster as rm
rm.init()
job = rm.Resumable()
assert job.restore() is None and not job.restored
job.save({"epoch": 3, "w": [1.0, 2.0]})
job.progress(3, 10, 30, 100, 0.25, 1234.5)
assert rm.Resumable().restore() == {"epoch": 3, "w": [1.0, 2.0]}
print("stop_point:", job.stop_point(lambda: 1 / 0))  # no stop: the state is not built
""", env={"RING_CHECKPOINT_DIR": str(tmp_path / "ck"), "RING_RUN_DIR": str(tmp_path)})
    assert r.returncode == 0, r.stderr
    assert "stop_point: False" in r.stdout
    assert sorted(os.listdir(tmp_path / "ck")) == ["checkpoint.pkl"]
    text = (tmp_path / "progress.json").read_text()
    assert text == ('{"epoch":3,"epochs":10,"step":30,"total_steps":100,"loss":0.250000,'
                    '"samples_per_s":1234.5,"world_size":1}\n')  # the C trainer's format
    assert json.loads(text)["world_size"] == 1


def test_resumable_stop_point_checkpoints_and_exits_75(tmp_path):
    r = run("""
import ringmaster as rm, numpy as np
rm.init()
job = rm.Resumable()
for step in range(100):
    rm.allreduce(np.ones(1), name="step")
    if step == 4:
        rm.request_stop()
    job.stop_point(lambda: {"step": step})
print("not stopped")
""", env={"RING_CHECKPOINT_DIR": str(tmp_path)})
    assert r.returncode == 75, r.stdout + r.stderr
    assert "not stopped" not in r.stdout and "exiting 75" in r.stdout
    assert "stop agreed" in r.stderr
    r = run("import ringmaster as rm\nrm.init()\nprint(rm.Resumable().restore())", env={"RING_CHECKPOINT_DIR": str(tmp_path)})
    assert r.stdout.strip() == "{'step': 4}", r.stderr


def test_resumable_corrupt_checkpoint_is_an_error(tmp_path):
    (tmp_path / "checkpoint.pkl").write_bytes(b"not a pickle")
    r = run("import ringmaster as rm\nrm.init()\nrm.Resumable().restore()", env={"RING_CHECKPOINT_DIR": str(tmp_path)})
    assert r.returncode != 0 and "cannot read checkpoint %s/checkpoint.pkl" % tmp_path in r.stderr


def test_torch_resumable_uses_torch_save(tmp_path):
    pytest.importorskip("torch")
    r = run("""
import torch, ringmaster.torch as rt
rt.init()
job = rt.Resumable()
job.save({"t": torch.arange(3)})
print(rt.Resumable().restore()["t"].tolist(), job.path)
""", env={"RING_CHECKPOINT_DIR": str(tmp_path)})
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["[0,", "1,", "2]", str(tmp_path / "checkpoint.pt")]
