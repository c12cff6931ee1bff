# SPDX-License-Identifier: Apache-2.0
"""ringmaster on numpy arrays, at any world size (ctest runs it at np 1 and 3): every
collective blocking, in place and async, every dtype and op against a serial reference,
process sets, join, errors. Run it as `ringrun -np N python3 -m pytest test_numpy.py`."""
import json
import os

import numpy as np
import pytest

from conftest import world

RANK, SIZE = world()

DTYPES = ["uint8", "int8", "int16", "uint16", "int32", "int64", "float16", "bfloat16", "float32", "float64"]
INTS = ("uint8", "int8", "int16", "uint16", "int32", "int64")
OPS = ["sum", "average", "min", "max", "product"]


def bf16_bits(f32):
    """float32 values (exact in bfloat16) -> their bfloat16 bit patterns as uint16."""
    return (np.asarray(f32, dtype=np.float32).view(np.uint32) >> 16).astype(np.uint16)


def bf16_values(bits):
    return (bits.astype(np.uint32) << 16).view(np.float32)


def contribution(dtype, rank, n=7):
    """Rank r's values: small integers, so that every dtype holds every result exactly."""
    v = (np.arange(n) + rank) % 3 + 1 + (rank % 2)
    if dtype == "bfloat16":
        return bf16_bits(v.astype(np.float32))
    return v.astype(dtype)


def typed(values, dtype):
    """Exact small integers as an array of dtype (bfloat16: its bit patterns)."""
    v = np.asarray(values)
    return bf16_bits(v.astype(np.float32)) if dtype == "bfloat16" else v.astype(dtype)


def reference(dtype, op, n=7):
    vals = [contribution(dtype, r, n).astype(np.float64) if dtype != "bfloat16"
            else bf16_values(contribution(dtype, r, n)).astype(np.float64) for r in range(SIZE)]
    s = np.stack(vals)
    out = {"sum": s.sum(0), "min": s.min(0), "max": s.max(0), "product": s.prod(0),
           "average": s.sum(0) / SIZE}[op]
    if op == "average" and dtype in INTS:
        out = np.trunc(out)  # libring: integer scaling truncates toward zero
    return out


def as_float(x, dtype):
    return bf16_values(x) if dtype == "bfloat16" else x.astype(np.float64)


def kw(dtype):
    return {"dtype": "bfloat16"} if dtype == "bfloat16" else {}


def test_worker_contract(rm):
    assert (rm.rank(), rm.size()) == (RANK, SIZE)
    assert 0 <= rm.local_rank() < rm.local_size() <= SIZE
    assert 0 <= rm.cross_rank() < rm.cross_size()
    assert rm.local_rank() == int(os.environ.get("RING_LOCAL_RANK", 0))
    assert rm.is_initialized()
    assert rm.version().count(".") == 2


def test_the_job_secret_is_nobody_elses(rm):
    """ringrun's RING_JOB_SECRET leaves the environment at init(): neither Python code nor a
    child process (through os.environ or the C environment) sees it."""
    import subprocess

    assert "RING_JOB_SECRET" not in os.environ
    out = subprocess.run(["sh", "-c", 'echo "${RING_JOB_SECRET-unset}"'], capture_output=True,
                         text=True, check=True).stdout
    assert out == "unset\n"


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_allreduce_every_dtype_and_op(rm, dtype, op):
    x = contribution(dtype, RANK)
    before = x.copy()
    out = rm.allreduce(x, op=op, name="ar.%s.%s" % (dtype, op), **kw(dtype))
    assert out is not x and np.array_equal(x, before)
    assert out.dtype == x.dtype and out.shape == x.shape
    np.testing.assert_allclose(as_float(out, dtype), reference(dtype, op), rtol=1e-2 if "16" in dtype else 1e-6)
    # The same, in place and without a name (libring's blocking call).
    y = contribution(dtype, RANK)
    assert rm.allreduce_(y, op=op, **kw(dtype)) is y
    np.testing.assert_array_equal(y, out)


def test_allreduce_default_op_is_average(rm):
    out = rm.allreduce(np.full(3, float(RANK)))
    np.testing.assert_allclose(out, np.full(3, (SIZE - 1) / 2))


def test_allreduce_scale_factors(rm):
    x = np.full(5, RANK + 1, dtype=np.float32)
    out = rm.allreduce(x, op=rm.Sum, prescale_factor=2.0, postscale_factor=0.5)
    np.testing.assert_allclose(out, np.full(5, SIZE * (SIZE + 1) / 2))
    out = rm.allreduce(x, op=rm.Average, postscale_factor=3.0, name="scaled")
    np.testing.assert_allclose(out, np.full(5, 3.0 * (SIZE + 1) / 2))
    out = rm.allreduce(np.full(4, 7, dtype=np.int32), op=rm.Sum, postscale_factor=0.5)
    np.testing.assert_array_equal(out, np.full(4, int(7 * SIZE * 0.5)))


def test_allreduce_non_contiguous_in_place(rm):
    a = np.arange(12, dtype=np.float64).reshape(3, 4)
    col = a[:, 1]
    assert not col.flags.c_contiguous
    assert rm.allreduce_(col, op=rm.Sum) is col
    np.testing.assert_array_equal(a[:, 1], np.array([1, 5, 9]) * SIZE)
    np.testing.assert_array_equal(a[:, 0], [0, 4, 8])  # untouched around it
    out = rm.allreduce(a[:, 2], op=rm.Sum)
    np.testing.assert_array_equal(out, np.array([2, 6, 10]) * SIZE)


def test_allreduce_empty_and_scalar(rm):
    assert rm.allreduce(np.zeros(0, np.float32), op=rm.Sum).shape == (0,)
    out = rm.allreduce(np.array(2.0), op=rm.Sum)
    assert out.shape == () and out == 2.0 * SIZE


def test_allreduce_async(rm):
    xs = [np.full(10, float(RANK + i)) for i in range(4)]
    ys = [x.copy() for x in xs]  # an operation in flight owns its buffers
    hs = [rm.allreduce_async(x, op=rm.Sum, name="async.%d" % i) for i, x in enumerate(xs)]
    hs_ = [rm.allreduce_async_(y, op=rm.Max) for y in ys]  # unnamed: numbered per kind
    for i, h in reversed(list(enumerate(hs))):  # waiting order does not matter
        np.testing.assert_array_equal(rm.synchronize(h), np.full(10, float(SIZE * i + SIZE * (SIZE - 1) / 2)))
    for i, h in enumerate(hs_):
        while not rm.poll(h):
            pass
        assert rm.synchronize(h) is ys[i]
        np.testing.assert_array_equal(ys[i], np.full(10, float(SIZE - 1 + i)))
    assert rm.synchronize(hs[0]) is rm.synchronize(hs[0])  # waiting twice: the same result


def test_grouped_allreduce(rm):
    xs = [np.full(n, float(RANK + 1), dtype=np.float32) for n in (1, 100, 7)]
    outs = rm.grouped_allreduce(xs, op=rm.Sum, name="group")
    for x, o in zip(xs, outs):
        assert o.shape == x.shape
        np.testing.assert_array_equal(o, np.full(x.shape, SIZE * (SIZE + 1) / 2))
        np.testing.assert_array_equal(x, np.full(x.shape, RANK + 1))
    outs = rm.grouped_allreduce(xs, op=rm.Sum, prescale_factor=2.0, postscale_factor=0.25)
    np.testing.assert_allclose(outs[1], np.full(100, SIZE * (SIZE + 1) / 4))
    assert rm.grouped_allreduce_(xs, op=rm.Average) == xs
    np.testing.assert_allclose(xs[2], np.full(7, (SIZE + 1) / 2))
    h = rm.grouped_allreduce_async([np.ones(3), np.ones(2)], op=rm.Sum)
    assert [o.tolist() for o in rm.synchronize(h)] == [[SIZE] * 3, [SIZE] * 2]
    ys = [np.ones(3), np.ones(2)]
    h = rm.grouped_allreduce_async_(ys, op=rm.Sum, name="group.inplace")
    assert rm.synchronize(h) == ys and ys[1].tolist() == [SIZE] * 2
    assert rm.grouped_allreduce([]) == []
    with pytest.raises(TypeError, match="one dtype"):
        rm.grouped_allreduce([np.ones(2), np.ones(2, np.float32)])


@pytest.mark.parametrize("dtype", DTYPES)
def test_allgather_uneven_rows(rm, dtype):
    rows = RANK + 1
    x = np.full((rows, 3), RANK + 1).astype(dtype if dtype != "bfloat16" else np.uint16)
    out = rm.allgather(x, name="ag." + dtype, **kw(dtype))
    assert out.shape == (SIZE * (SIZE + 1) // 2, 3)
    want = np.concatenate([np.full((r + 1, 3), r + 1) for r in range(SIZE)])
    np.testing.assert_array_equal(out.astype(np.int64), want)


def test_allgather_async_and_scalars(rm):
    h1 = rm.allgather_async(np.array([RANK], dtype=np.int64), name="ag.first")
    h2 = rm.allgather_async(np.full((2, 2), RANK, dtype=np.int32))
    np.testing.assert_array_equal(rm.synchronize(h2)[::2, 0], np.arange(SIZE))
    np.testing.assert_array_equal(rm.synchronize(h1), np.arange(SIZE))
    np.testing.assert_array_equal(rm.allgather(np.array(float(RANK))), np.arange(SIZE))
    out = rm.allgather(np.zeros((0, 5), np.float32))
    assert out.shape == (0, 5)


def test_allgather_other_dims_must_agree(rm):
    if SIZE == 1:
        pytest.skip("needs two ranks")
    x = np.zeros((1, 2 + RANK % 2))
    with pytest.raises(rm.RingError, match="RING_EMISMATCH: .*dimensions after the first differ"):
        rm.allgather(x, name="ag.bad")


def test_broadcast(rm):
    for root in range(SIZE):
        x = np.full(6, RANK, dtype=np.int64)
        out = rm.broadcast(x, root, name="bc.%d" % root)
        np.testing.assert_array_equal(out, np.full(6, root))
        np.testing.assert_array_equal(x, np.full(6, RANK))
        assert rm.broadcast_(x, root) is x and (x == root).all()
    x = np.full((2, 3), float(RANK))
    h = rm.broadcast_async_(x[:, 1], SIZE - 1)  # a non-contiguous column
    rm.synchronize(h)
    np.testing.assert_array_equal(x[:, 1], [SIZE - 1] * 2)
    np.testing.assert_array_equal(x[:, 0], [RANK] * 2)
    h = rm.broadcast_async(np.arange(4.0) + RANK, 0, name="bc.async")
    np.testing.assert_array_equal(rm.synchronize(h), np.arange(4.0))


def test_alltoall(rm):
    x = np.arange(SIZE * 2, dtype=np.float32).reshape(SIZE, 2) + 100 * RANK
    out = rm.alltoall(x)  # row j goes to rank j
    np.testing.assert_array_equal(out, np.array([[100 * r + 2 * RANK, 100 * r + 2 * RANK + 1] for r in range(SIZE)]))
    # With splits: rank r sends j + 1 rows of value 10 r + j to rank j.
    splits = [j + 1 for j in range(SIZE)]
    x = np.concatenate([np.full((j + 1, 2), 10 * RANK + j) for j in range(SIZE)]).astype(np.int32)
    for blocking in (True, False):
        if blocking:
            out, got = rm.alltoall(x, splits=splits, name="a2a.splits")
        else:
            out, got = rm.synchronize(rm.alltoall_async(x, splits=np.array(splits)))
        np.testing.assert_array_equal(got, [RANK + 1] * SIZE)
        np.testing.assert_array_equal(out[:, 0], np.repeat([10 * r + RANK for r in range(SIZE)], RANK + 1))
    h = rm.alltoall_async(np.ones(SIZE * 3), name="a2a.async")
    np.testing.assert_array_equal(rm.synchronize(h), np.ones(SIZE * 3))


@pytest.mark.parametrize("dtype", DTYPES)
def test_broadcast_and_alltoall_every_dtype(rm, dtype):
    # Values 10 r + j name their sender r and their place j, and are exact in every dtype.
    x = typed([10 * RANK + j for j in range(5)], dtype)
    for root in (0, SIZE - 1):
        out = rm.broadcast(x, root, name="bc.%s.%d" % (dtype, root), **kw(dtype))
        assert out.dtype == x.dtype
        np.testing.assert_array_equal(out, typed([10 * root + j for j in range(5)], dtype))
    y = x.copy()
    assert rm.synchronize(rm.broadcast_async_(y, SIZE - 1, **kw(dtype))) is y
    np.testing.assert_array_equal(y, typed([10 * (SIZE - 1) + j for j in range(5)], dtype))
    np.testing.assert_array_equal(rm.synchronize(rm.broadcast_async(x, 0, **kw(dtype))), typed(range(5), dtype))
    np.testing.assert_array_equal(rm.broadcast_(x.copy(), 0, **kw(dtype)), typed(range(5), dtype))
    # alltoall: row j (two values) goes to rank j.
    rows = typed([[10 * RANK + j] * 2 for j in range(SIZE)], dtype)
    want = typed([[10 * r + RANK] * 2 for r in range(SIZE)], dtype)
    out = rm.alltoall(rows, name="a2a." + dtype, **kw(dtype))
    assert out.dtype == rows.dtype
    np.testing.assert_array_equal(out, want)
    np.testing.assert_array_equal(rm.synchronize(rm.alltoall_async(rows, **kw(dtype))), want)
    np.testing.assert_array_equal(rm.allgather(x, **kw(dtype)), typed([10 * r + j for r in range(SIZE) for j in range(5)], dtype))


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_reducescatter_every_dtype_and_op(rm, dtype, op):
    rows = 2 * SIZE + 1
    x = contribution(dtype, RANK, n=rows * 2).reshape(rows, 2)
    want = reference(dtype, op, n=rows * 2).reshape(rows, 2)
    base, extra = divmod(rows, SIZE)
    start = RANK * base + min(RANK, extra)
    want = want[start : start + base + (1 if RANK < extra else 0)]
    tol = 1e-2 if "16" in dtype else 1e-6
    out = rm.reducescatter(x, op=op, name="rs.%s.%s" % (dtype, op), **kw(dtype))
    assert out.dtype == x.dtype and out.shape == want.shape
    np.testing.assert_allclose(as_float(out, dtype), want, rtol=tol)
    out = rm.synchronize(rm.reducescatter_async(x, op=op, **kw(dtype)))
    np.testing.assert_allclose(as_float(out, dtype), want, rtol=tol)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "int32"])
def test_async_and_grouped_in_16_bits(rm, dtype):
    h = rm.allreduce_async(contribution(dtype, RANK), op=rm.Sum, name="async16." + dtype, **kw(dtype))
    y = contribution(dtype, RANK)
    h_ = rm.allreduce_async_(y, op=rm.Max, **kw(dtype))
    np.testing.assert_allclose(as_float(rm.synchronize(h), dtype), reference(dtype, "sum"), rtol=1e-2)
    assert rm.synchronize(h_) is y
    np.testing.assert_allclose(as_float(y, dtype), reference(dtype, "max"))
    outs = rm.grouped_allreduce([contribution(dtype, RANK), contribution(dtype, RANK, n=3)], op=rm.Min, **kw(dtype))
    np.testing.assert_allclose(as_float(outs[1], dtype), reference(dtype, "min", n=3))
    g = rm.allgather(contribution(dtype, RANK, n=2), name="ag16." + dtype, **kw(dtype))
    np.testing.assert_array_equal(g, np.concatenate([contribution(dtype, r, n=2) for r in range(SIZE)]))


@pytest.mark.parametrize("rows", [1, 4, 5, 12])
def test_reducescatter_rows(rm, rows):
    x = np.arange(rows * 3, dtype=np.float64).reshape(rows, 3) + RANK
    total = sum(np.arange(rows * 3).reshape(rows, 3) + r for r in range(SIZE))
    out = rm.reducescatter(x, op=rm.Sum, name="rs.%d" % rows)
    base, extra = divmod(rows, SIZE)
    start = RANK * base + min(RANK, extra)
    mine = base + (1 if RANK < extra else 0)
    np.testing.assert_array_equal(out, total[start : start + mine])
    h = rm.reducescatter_async(x[:, 0].copy(), op=rm.Average, prescale_factor=2.0)
    np.testing.assert_allclose(rm.synchronize(h), 2.0 * total[start : start + mine, 0] / SIZE)


def test_barrier_and_join(rm):
    rm.barrier()
    # Uneven data: rank r has r + 1 batches, then joins; joined ranks add nothing and
    # Average divides by the ranks still working.
    for step in range(SIZE):
        if step > RANK:
            break
        working = SIZE - step
        out = rm.allreduce(np.full(3, 1.0), op=rm.Average, name="join.avg")
        np.testing.assert_allclose(out, np.ones(3))
        out = rm.allreduce(np.full(3, 1.0), op=rm.Sum, name="join.sum")
        np.testing.assert_allclose(out, np.full(3, float(working)))
    assert rm.join() == SIZE - 1


def test_remove_process_set(rm):
    """Before test_process_sets, which registers the same ranks at np 1."""
    ps = rm.add_process_set([SIZE - 1])
    assert rm.remove_process_set(ps) and ps.process_set_id is None
    assert not rm.remove_process_set(ps)
    with pytest.raises(ValueError, match="not registered"):
        rm.allreduce(np.ones(1), process_set=ps)


def test_process_sets(rm):
    evens = rm.add_process_set(list(range(0, SIZE, 2)))
    assert evens.included() == (RANK % 2 == 0)
    assert evens.size() == (SIZE + 1) // 2
    assert evens.rank() == (RANK // 2 if RANK % 2 == 0 else -1)
    if evens.included():
        out = rm.allreduce(np.full(2, float(RANK)), op=rm.Sum, process_set=evens, name="ps.sum")
        np.testing.assert_array_equal(out, np.full(2, float(sum(range(0, SIZE, 2)))))
        out = rm.allgather(np.array([RANK]), process_set=evens)
        np.testing.assert_array_equal(out, np.arange(0, SIZE, 2))
        out = rm.broadcast(np.array([RANK]), evens.size() - 1, process_set=evens)
        assert out[0] == 2 * (evens.size() - 1)
        h = rm.allreduce_async(np.ones(1), process_set=evens)  # unnamed: numbered per set
        assert rm.synchronize(h)[0] == 1.0
        rm.barrier(process_set=evens)
        k, me = evens.size(), evens.rank()
        members = list(range(0, SIZE, 2))
        outs = rm.grouped_allreduce([np.ones(2), np.full(3, float(RANK))], op=rm.Sum, process_set=evens)
        assert outs[0].tolist() == [k] * 2 and outs[1].tolist() == [sum(members)] * 3
        y = np.full(2, float(RANK))
        rm.synchronize(rm.allreduce_async_(y, op=rm.Max, process_set=evens, name="ps.max"))
        assert y.tolist() == [members[-1]] * 2
        np.testing.assert_array_equal(rm.synchronize(rm.allgather_async(np.array([RANK]), process_set=evens)), members)
        z = np.array([RANK])
        rm.synchronize(rm.broadcast_async_(z, 0, process_set=evens))
        assert z[0] == 0
        out = rm.alltoall(np.arange(k, dtype=np.int32) + 10 * me, process_set=evens, name="ps.a2a")
        np.testing.assert_array_equal(out, [10 * r + me for r in range(k)])
        out = rm.reducescatter(np.ones((k, 2)), op=rm.Sum, process_set=evens)
        np.testing.assert_array_equal(out, np.full((1, 2), float(k)))
        assert rm.broadcast_object("from %d" % RANK, root_rank=k - 1, process_set=evens) == "from %d" % members[-1]
        assert rm.allgather_object(RANK, process_set=evens) == members
    else:
        with pytest.raises(rm.RingError, match="not a member") as e:
            rm.allreduce(np.ones(1), process_set=evens)
        assert e.value.name == "RING_EINVAL"
        for call in (lambda: rm.allgather(np.ones(1), process_set=evens),
                     lambda: rm.broadcast(np.ones(1), 0, process_set=evens),
                     lambda: rm.alltoall(np.ones(evens.size()), process_set=evens),
                     lambda: rm.reducescatter(np.ones(1), process_set=evens),
                     lambda: rm.grouped_allreduce([np.ones(1)], process_set=evens)):
            with pytest.raises(rm.RingError, match="not a member"):
                call()
    rm.barrier()
    with pytest.raises(ValueError, match="twice"):
        rm.ProcessSet([0, 0])
    with pytest.raises(ValueError, match="not registered"):
        rm.allreduce(np.ones(1), process_set=rm.ProcessSet([0]))


def test_bool_arrays(rm):
    """OR for sum and max, AND for product and min; no average."""
    x = np.array([RANK == 0, True, False])
    np.testing.assert_array_equal(rm.allreduce(x, op=rm.Sum), [True, True, False])
    np.testing.assert_array_equal(rm.allreduce(x, op=rm.Min, name="np.bool.min"), [SIZE == 1, True, False])
    np.testing.assert_array_equal(rm.allgather(x[:1]), [r == 0 for r in range(SIZE)])
    with pytest.raises(ValueError, match="bool"):
        rm.allreduce(x, op=rm.Average)


def test_grouped_allgather_and_reducescatter(rm):
    xs = [np.full((RANK + 1, 2), RANK, np.int16), np.arange(3, dtype=np.float32) + RANK]
    outs = rm.grouped_allgather(xs)
    np.testing.assert_array_equal(outs[0][:, 0], np.repeat(np.arange(SIZE), np.arange(1, SIZE + 1)))
    np.testing.assert_array_equal(outs[1], np.concatenate([np.arange(3) + r for r in range(SIZE)]))
    outs = rm.synchronize(rm.grouped_allgather_async(xs, name="np.gag"))
    assert outs[0].dtype == np.int16 and outs[1].shape == (3 * SIZE,)
    ys = [np.ones((2 * SIZE + 1, 3)), np.full(SIZE, float(RANK))]
    for got, y in zip(rm.grouped_reducescatter(ys, op=rm.Sum), ys):
        np.testing.assert_array_equal(got, rm.reducescatter(y, op=rm.Sum))
    got = rm.synchronize(rm.grouped_reducescatter_async(ys, op=rm.Average, name="np.grs"))
    np.testing.assert_allclose(got[1], rm.reducescatter(ys[1]))


def test_adasum_and_shapes(rm):
    v = np.array([1.0, -2.0, 0.5])
    np.testing.assert_allclose(rm.allreduce(v, op=rm.Adasum), v, rtol=1e-12)
    if SIZE > 1:
        with pytest.raises(rm.RingError, match="different shapes"):
            rm.allreduce(np.ones((2, 3) if RANK == 0 else (3, 2)), name="np.shapes")


def test_process_set_lists_must_agree(rm):
    if SIZE == 1:
        pytest.skip("needs two ranks")
    with pytest.raises(rm.RingError) as e:
        rm.add_process_set([0] if RANK == 0 else [0, 1])
    assert e.value.name == "RING_EMISMATCH" and "different rank" in str(e.value)


def test_objects(rm):
    assert rm.broadcast_object({"from": RANK, "x": [1, 2]}, root_rank=SIZE - 1) == {"from": SIZE - 1, "x": [1, 2]}
    assert rm.allgather_object("r" * RANK, name="objs") == ["r" * r for r in range(SIZE)]


def test_errors_carry_libring_message(rm):
    if SIZE > 1:
        with pytest.raises(rm.RingError) as e:
            rm.allreduce(np.ones(3 + RANK % 2, np.float32), name="grad/w1")
        assert e.value.code == -13 and e.value.name == "RING_EMISMATCH"
        assert "allreduce 'grad/w1'" in str(e.value) and "elements" in str(e.value)
        with pytest.raises(rm.RingError, match="rank 0 sent float32"):
            rm.allreduce(np.ones(2, np.float32 if RANK == 0 else np.float64), name="grad/w2")
        # An async error surfaces when the handle is waited on, with the same message.
        h = rm.allreduce_async(np.ones(3 + RANK % 2, np.float32), name="grad/w3")
        with pytest.raises(rm.RingError, match="allreduce 'grad/w3'") as e:
            rm.synchronize(h)
        assert e.value.name == "RING_EMISMATCH"
        with pytest.raises(rm.RingError, match="RING_EMISMATCH"):  # unnamed: libring's blocking call
            rm.allreduce_(np.ones(3 + RANK % 2, np.float32), op=rm.Sum)
    with pytest.raises(rm.RingError, match="MIN and MAX take no scaling") as e:
        rm.allreduce(np.ones(2), op=rm.Min, prescale_factor=2.0)
    assert e.value.name == "RING_EINVAL"
    with pytest.raises(rm.RingError, match="root 99"):
        rm.broadcast(np.ones(2), 99)
    if SIZE > 1:  # rank 0's request stays in flight until the others submit theirs
        if RANK == 0:
            h = rm.allreduce_async(np.ones(2), name="twice")
            with pytest.raises(rm.RingError, match="already in flight"):
                rm.allreduce_async(np.ones(2), name="twice")
        rm.barrier()
        if RANK != 0:
            h = rm.allreduce_async(np.ones(2), name="twice")
        assert rm.synchronize(h).tolist() == [1.0, 1.0]
    with pytest.raises(TypeError, match="complex64 is not supported"):
        rm.allreduce(np.ones(2, dtype=np.complex64))
    with pytest.raises(ValueError, match="invalid op average .* for bool"):
        rm.allreduce(np.ones(2, dtype=bool))
    with pytest.raises(TypeError, match="numpy array"):
        rm.allreduce([1.0, 2.0])
    with pytest.raises(TypeError, match="bfloat16"):
        rm.allreduce(np.ones(2, np.float32), dtype="bfloat16")
    with pytest.raises(ValueError, match="unknown op"):
        rm.allreduce(np.ones(2), op="mean")
    with pytest.raises(ValueError, match="ADASUM float dtypes only"):
        rm.allreduce(np.ones(2, np.int32), op=rm.Adasum)
    ro = np.ones(2)
    ro.flags.writeable = False
    with pytest.raises(ValueError, match="writable"):
        rm.allreduce_(ro)
    with pytest.raises(TypeError, match="ProcessSet"):
        rm.allreduce(np.ones(2), process_set=3)
    with pytest.raises(ValueError, match="splits must be"):
        rm.alltoall(np.ones(4), splits=[5] + [0] * (SIZE - 1))
    if SIZE > 1:
        with pytest.raises(ValueError, match="do not split evenly"):
            rm.alltoall(np.ones(SIZE + 1))
    with pytest.raises(ValueError, match="at least one dimension"):
        rm.reducescatter(np.array(1.0))


def test_timeline_and_stats(rm, tmp_path_factory):
    path = str(tmp_path_factory.mktemp("tl") / "timeline.json") if RANK == 0 else "/nonexistent/ignored"
    before = rm.engine_stats()
    rm.start_timeline(path)
    rm.allreduce(np.ones(4), name="traced.tensor")
    rm.stop_timeline()  # returns once rank 0's file is complete
    after = rm.engine_stats()
    assert after["tensors"] > before["tensors"] and after["cycles"] > before["cycles"]
    if RANK == 0:
        with open(path) as f:
            events = json.load(f)
        events = events["traceEvents"] if isinstance(events, dict) else events
        assert any("traced.tensor" in json.dumps(e) for e in events)


def test_zz_stop_request_is_agreed(rm):
    """Last: a stop cannot be taken back."""
    assert not rm.stop_requested()
    if RANK == SIZE - 1:
        rm.request_stop()
    for _ in range(3):  # the flag travels with the next negotiation
        rm.allreduce(np.ones(1), name="after.stop")
    assert rm.stop_requested()
