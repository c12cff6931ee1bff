# SPDX-License-Identifier: Apache-2.0
"""ringmaster.torch, run as `ringrun -np 2 python3 -m pytest test_torch.py`: every binding
function on CPU tensors (dtypes including float16 and bfloat16, in place, async, autograd,
errors, join, process sets), DistributedOptimizer against a serial reference, the
broadcast helpers and compression. With RING_COMPRESSION=bf16, test_wire_* checks that
Compression.bf16 leaves the conversion to libring's engine."""
import warnings

import pytest
import torch

from conftest import world

RANK, SIZE = world()
DTYPES = [torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64, torch.float16, torch.bfloat16,
          torch.float32, torch.float64] + ([torch.uint16] if hasattr(torch, "uint16") else [])


def values(dtype, rank, n=6):
    return ((torch.arange(n) + rank) % 3 + 1 + rank % 2).to(dtype)


def reference(dtype, op):
    s = torch.stack([values(torch.float64, r) for r in range(SIZE)])
    out = {"sum": s.sum(0), "min": s.min(0).values, "max": s.max(0).values, "product": s.prod(0),
           "average": s.sum(0) / SIZE}[op]
    if op == "average" and not dtype.is_floating_point:
        out = out.trunc()
    return out


@pytest.mark.parametrize("op", ["sum", "average", "min", "max", "product"])
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_allreduce_every_dtype(hvd, dtype, op):
    x = values(dtype, RANK)
    out = hvd.allreduce(x, op=op, name="t.%s.%s" % (dtype, op))
    assert out.dtype == dtype and out.shape == x.shape
    torch.testing.assert_close(out.double(), reference(dtype, op), rtol=1e-2 if dtype in (torch.float16, torch.bfloat16) else 1e-6, atol=0)
    y = values(dtype, RANK)
    ptr = y.data_ptr()
    assert hvd.allreduce_(y, op=op) is y and y.data_ptr() == ptr
    assert torch.equal(y, out)
    # Unnamed and out of place (libring's blocking call, straight from Python).
    x = values(dtype, RANK)
    z = hvd.allreduce(x, op=op)
    assert z.dtype == dtype and torch.equal(z, out) and torch.equal(x, values(dtype, RANK))
    # Async, out of place and in place.
    h = hvd.allreduce_async(values(dtype, RANK), op=op, name="ta.%s.%s" % (dtype, op))
    w = values(dtype, RANK)
    h_ = hvd.allreduce_async_(w, op=op)
    assert torch.equal(hvd.synchronize(h), out)
    assert hvd.synchronize(h_) is w and torch.equal(w, out)


def exact(rows, dtype):
    """Small integers, exact in every dtype."""
    return torch.tensor(rows, dtype=torch.float64).to(dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_other_collectives_every_dtype(hvd, dtype):
    # Values 10 r + j name their sender r and their place j.
    x = exact([[10 * RANK + j] * 2 for j in range(SIZE)], dtype)
    mine = exact([[10 * r + RANK] * 2 for r in range(SIZE)], dtype)
    for root in range(SIZE):
        b = hvd.broadcast(x, root, name="tb.%s.%d" % (dtype, root))
        assert b.dtype == dtype and torch.equal(b, exact([[10 * root + j] * 2 for j in range(SIZE)], dtype))
    assert torch.equal(x, exact([[10 * RANK + j] * 2 for j in range(SIZE)], dtype))
    y = x.clone()
    assert hvd.broadcast_(y, SIZE - 1) is y and torch.equal(y[:, 0], exact([10 * (SIZE - 1) + j for j in range(SIZE)], dtype))
    assert torch.equal(hvd.synchronize(hvd.broadcast_async(x, 0)), exact([[j] * 2 for j in range(SIZE)], dtype))
    y = x.clone()
    assert hvd.synchronize(hvd.broadcast_async_(y, 0)) is y and torch.equal(y, exact([[j] * 2 for j in range(SIZE)], dtype))
    g = hvd.allgather(x[: RANK + 1], name="tg." + str(dtype))
    assert g.dtype == dtype and torch.equal(g, torch.cat([exact([[10 * r + j] * 2 for j in range(r + 1)], dtype)
                                                          for r in range(SIZE)]))
    assert torch.equal(hvd.synchronize(hvd.allgather_async(x)), torch.cat([exact([[10 * r + j] * 2 for j in range(SIZE)], dtype)
                                                                          for r in range(SIZE)]))
    a = hvd.alltoall(x, name="tt." + str(dtype))
    assert a.dtype == dtype and torch.equal(a, mine)
    a, got = hvd.synchronize(hvd.alltoall_async(x))  # a handle gives the splits too, as Horovod's
    assert torch.equal(a, mine) and got.tolist() == [1] * SIZE
    out, got = hvd.alltoall(x, splits=torch.ones(SIZE, dtype=torch.int64))
    assert torch.equal(out, mine) and got.tolist() == [1] * SIZE


@pytest.mark.parametrize("op", ["sum", "average", "min", "max", "product"])
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_reducescatter_every_dtype(hvd, dtype, op):
    rows = 2 * SIZE + 1
    x = values(dtype, RANK, n=rows * 2).reshape(rows, 2)
    s = torch.stack([values(torch.float64, r, n=rows * 2).reshape(rows, 2) for r in range(SIZE)])
    want = {"sum": s.sum(0), "min": s.min(0).values, "max": s.max(0).values, "product": s.prod(0),
            "average": s.sum(0) / SIZE}[op]
    if op == "average" and not dtype.is_floating_point:
        want = want.trunc()
    base, extra = divmod(rows, SIZE)
    start = RANK * base + min(RANK, extra)
    want = want[start : start + base + (1 if RANK < extra else 0)]
    tol = dict(rtol=1e-2 if dtype in (torch.float16, torch.bfloat16) else 1e-6, atol=0)
    out = hvd.reducescatter(x, op=op, name="trs.%s.%s" % (dtype, op))
    assert out.dtype == dtype
    torch.testing.assert_close(out.double(), want, **tol)
    out = hvd.synchronize(hvd.reducescatter_async(x, op=op))
    torch.testing.assert_close(out.double(), want, **tol)


def test_average_argument_and_scale_factors(hvd):
    x = torch.full((3,), float(RANK + 1))
    assert torch.equal(hvd.allreduce(x, average=False), torch.full((3,), SIZE * (SIZE + 1) / 2))
    assert torch.allclose(hvd.allreduce(x), torch.full((3,), (SIZE + 1) / 2))
    out = hvd.allreduce(x, op=hvd.Sum, prescale_factor=4.0, postscale_factor=0.5)
    assert torch.allclose(out, torch.full((3,), SIZE * (SIZE + 1.0)))
    with pytest.raises(ValueError, match="not both"):
        hvd.allreduce(x, average=True, op=hvd.Sum)


def test_in_place_and_async(hvd):
    t = torch.arange(8, dtype=torch.float32).reshape(2, 4)
    col = t[:, 1]
    assert hvd.allreduce_(col, op=hvd.Sum) is col
    assert t[:, 1].tolist() == [1.0 * SIZE, 5.0 * SIZE] and t[:, 0].tolist() == [0.0, 4.0]
    a = torch.full((1000,), float(RANK))
    b = torch.full((1000,), float(RANK))
    ha = hvd.allreduce_async(a, op=hvd.Max, name="async.max")
    hb = hvd.allreduce_async_(b, op=hvd.Min)
    assert hvd.synchronize(hb) is b and torch.equal(b, torch.zeros(1000))
    while not hvd.poll(ha):
        pass
    assert torch.equal(hvd.synchronize(ha), torch.full((1000,), float(SIZE - 1)))
    assert torch.equal(a, torch.full((1000,), float(RANK)))


def test_grouped_allreduce(hvd):
    ts = [torch.full((n,), float(RANK + 1)) for n in (3, 50)]
    outs = hvd.grouped_allreduce(ts, op=hvd.Sum, name="grp")
    assert [o.shape[0] for o in outs] == [3, 50] and torch.all(outs[1] == SIZE * (SIZE + 1) / 2)
    assert hvd.grouped_allreduce_(ts) == ts and torch.allclose(ts[0], torch.full((3,), (SIZE + 1) / 2))
    h = hvd.grouped_allreduce_async([torch.ones(2), torch.ones(1)], op=hvd.Sum)
    assert [o.tolist() for o in hvd.synchronize(h)] == [[SIZE] * 2, [SIZE]]
    us = [torch.ones(2, dtype=torch.bfloat16)]
    hvd.synchronize(hvd.grouped_allreduce_async_(us, op=hvd.Sum))
    assert us[0].tolist() == [SIZE] * 2


def test_allgather_broadcast_alltoall_reducescatter(hvd):
    g = hvd.allgather(torch.full((RANK + 1, 2), RANK, dtype=torch.int32))
    assert g.shape == (SIZE * (SIZE + 1) // 2, 2) and g[-1, 0].item() == SIZE - 1
    h = hvd.allgather_async(torch.tensor([RANK], dtype=torch.float16), name="ag.async")
    assert hvd.synchronize(h).tolist() == list(map(float, range(SIZE)))
    x = torch.full((4,), float(RANK))
    assert torch.equal(hvd.broadcast(x, SIZE - 1), torch.full((4,), float(SIZE - 1)))
    assert torch.equal(x, torch.full((4,), float(RANK)))
    assert hvd.broadcast_(x, 0) is x and torch.equal(x, torch.zeros(4))
    hvd.synchronize(hvd.broadcast_async_(x.fill_(RANK), SIZE - 1, name="bc.async"))
    assert torch.equal(x, torch.full((4,), float(SIZE - 1)))
    assert torch.equal(hvd.synchronize(hvd.broadcast_async(torch.tensor([RANK]), 0)), torch.tensor([0]))
    t = torch.arange(SIZE * 2).reshape(SIZE, 2) + 100 * RANK
    out = hvd.alltoall(t)
    assert out[:, 0].tolist() == [100 * r + 2 * RANK for r in range(SIZE)]
    splits = torch.tensor([1 + j for j in range(SIZE)])
    t = torch.cat([torch.full((j + 1,), 10 * RANK + j) for j in range(SIZE)])
    out, got = hvd.alltoall(t, splits=splits, name="a2a")
    assert got.tolist() == [RANK + 1] * SIZE
    assert out.tolist() == [10 * r + RANK for r in range(SIZE) for _ in range(RANK + 1)]
    out, got = hvd.synchronize(hvd.alltoall_async(t, splits=splits))
    assert got.tolist() == [RANK + 1] * SIZE
    rs = hvd.reducescatter(torch.ones(SIZE * 2 + 1, 3), op=hvd.Sum)
    assert rs.shape == (2 + (1 if RANK == 0 else 0), 3) and torch.all(rs == SIZE)
    rs = hvd.synchronize(hvd.reducescatter_async(torch.ones(SIZE * 2, dtype=torch.bfloat16), name="rs"))
    assert rs.tolist() == [1.0, 1.0]


def test_autograd(hvd):
    x = torch.ones(3, requires_grad=True)
    (hvd.allreduce(x * (RANK + 1), op=hvd.Sum) * 2).sum().backward()
    assert x.grad.tolist() == [2.0 * SIZE * (RANK + 1)] * 3  # d/dx of every rank's loss
    x = torch.ones(RANK + 1, 2, requires_grad=True)
    g = hvd.allgather(x)
    (g * torch.arange(g.shape[0]).unsqueeze(1)).sum().backward()
    off = RANK * (RANK + 1) // 2
    assert x.grad[:, 0].tolist() == [float(off + i) for i in range(RANK + 1)]  # averaged over ranks
    x = torch.ones(2, requires_grad=True)
    hvd.broadcast(x, 0).sum().backward()
    assert x.grad.tolist() == ([1.0, 1.0] if RANK == 0 else [0.0, 0.0])
    x = torch.ones(SIZE, requires_grad=True)
    (hvd.alltoall(x) * (RANK + 1)).sum().backward()
    assert x.grad.tolist() == [float(r + 1) for r in range(SIZE)]
    x = torch.ones(SIZE, 2, requires_grad=True)
    (hvd.reducescatter(x, op=hvd.Sum) * (RANK + 1)).sum().backward()
    # Horovod's: the gathered gradient, times the set's size for Sum
    assert x.grad[:, 0].tolist() == [float(SIZE * (r + 1)) for r in range(SIZE)]
    xs = [torch.ones(2, requires_grad=True), torch.ones(1, requires_grad=True)]
    sum(o.sum() for o in hvd.grouped_allreduce(xs, op=hvd.Sum)).backward()
    assert xs[1].grad.tolist() == [float(SIZE)]


def test_refuses_what_libring_cannot_take(hvd):
    for allreduce in (hvd.allreduce, hvd.allreduce_):  # out of place and in place
        with pytest.raises(RuntimeError, match="meta"):
            allreduce(torch.empty(2, device="meta"))
        with pytest.raises(TypeError, match="torch.complex64 is not supported"):
            allreduce(torch.ones(2, dtype=torch.complex64))
        with pytest.raises(RuntimeError, match="sparse"):
            allreduce(torch.eye(2).to_sparse())
        with pytest.raises(TypeError, match="torch.Tensor"):
            allreduce([1.0])
        with pytest.raises(ValueError, match="ADASUM float dtypes only"):
            allreduce(torch.ones(1, dtype=torch.int32), op=hvd.Adasum)
        with pytest.raises(ValueError, match="invalid op average .* for bool"):
            allreduce(torch.ones(2, dtype=torch.bool))
    if SIZE > 1:
        with pytest.raises(hvd.HorovodInternalError, match="rank 0 sent float32, rank 1 sent float64"):
            hvd.allreduce(torch.ones(2, dtype=torch.float32 if RANK == 0 else torch.float64), name="mixed")


def test_fast_path_checks_what_it_passes(hvd, monkeypatch):
    """The unnamed blocking allreduce on the global set goes straight to libring; what it
    cannot pass on takes the general path, and every error still reaches the caller."""
    from ringmaster.torch import ops

    fast, call = [], ops._call
    monkeypatch.setattr(ops, "_call", lambda *a: fast.append(a) or call(*a))
    x = torch.full((4,), float(RANK + 1))
    total = SIZE * (SIZE + 1) / 2
    for op in (hvd.Sum, "sum"):
        y = x.clone()
        assert hvd.allreduce_(y, op=op) is y and y.tolist() == [total] * 4
        assert hvd.allreduce(x, op=op).tolist() == [total] * 4
    assert hvd.allreduce_(x.clone()).tolist() == [total / SIZE] * 4  # Horovod's default: Average
    assert hvd.allreduce(x, op=hvd.Sum, prescale_factor=0.5, postscale_factor=4.0).tolist() == [2 * total] * 4
    assert len(fast) == 6
    # The general path: an upper-case name, int factors, a name.
    assert hvd.allreduce_(x.clone(), op="SUM").tolist() == [total] * 4
    assert hvd.allreduce(x, op=hvd.Sum, prescale_factor=2, postscale_factor=1).tolist() == [2 * total] * 4
    assert hvd.allreduce(x, op=hvd.Sum, name="fast.named").tolist() == [total] * 4
    assert len(fast) == 6
    assert hvd.allreduce_(x.clone(), average=False).tolist() == [total] * 4
    for bad in (True, 1.0, "bogus"):
        with pytest.raises(ValueError, match="unknown op"):
            hvd.allreduce_(x, op=bad)
        with pytest.raises(ValueError, match="unknown op"):
            hvd.allreduce(x, op=bad)
    with pytest.raises(hvd.HorovodInternalError, match="RING_EINVAL.*MIN and MAX take no scaling"):
        hvd.allreduce_(x, op=hvd.Max, postscale_factor=2.0)
    with pytest.raises(hvd.HorovodInternalError, match="RING_EINVAL.*factors must be finite"):
        hvd.allreduce(x, op=hvd.Sum, prescale_factor=float("inf"))
    assert x.tolist() == [float(RANK + 1)] * 4
    hvd.barrier()


def test_gpu_tensors_raise_a_clear_error(hvd):
    if not torch.cuda.is_available():
        pytest.skip("no GPU here: the refusal of device memory is checked with a meta tensor above")
    with pytest.raises(RuntimeError, match="CPU tensors only"):
        hvd.allreduce(torch.ones(2, device="cuda"))


def test_join_barrier_process_sets(hvd):
    hvd.barrier()
    for step in range(RANK + 1):
        out = hvd.allreduce(torch.ones(2), op=hvd.Sum, name="join")
        assert out.tolist() == [float(SIZE - step)] * 2
        # The async and grouped calls, too, while ranks below have joined.
        h = hvd.allreduce_async(torch.ones(3, dtype=torch.float16), op=hvd.Average, name="join.async")
        outs = hvd.grouped_allreduce([torch.ones(1), torch.full((2,), 2.0)], op=hvd.Sum, name="join.grouped")
        # Horovod's Average divides by the set's size, joined ranks included
        torch.testing.assert_close(hvd.synchronize(h).float(), torch.full((3,), (SIZE - step) / SIZE),
                                   rtol=1e-3, atol=0)
        assert outs[1].tolist() == [2.0 * (SIZE - step)] * 2
    assert hvd.join() == SIZE - 1
    ps = hvd.add_process_set(hvd.ProcessSet([SIZE - 1]))
    if RANK == SIZE - 1:
        assert ps.rank() == 0 and ps.size() == 1
        assert hvd.allreduce(torch.ones(1), op=hvd.Sum, process_set=ps).item() == 1.0
        hvd.barrier(process_set=ps)
    elif SIZE > 1:
        with pytest.raises(hvd.HorovodInternalError, match="not a member"):
            hvd.allreduce(torch.ones(1), process_set=ps)
    hvd.barrier()


def test_every_collective_on_a_process_set(hvd):
    """Every rank, listed backwards, as a set of its own: a set's ranks follow the world
    ranks in ascending order whatever the list's order (ring.h), and its collectives run
    apart from the global set's."""
    ps = hvd.add_process_set(list(range(SIZE))[::-1])
    me, k = ps.rank(), ps.size()
    assert ps.process_set_id != 0 and k == SIZE and me == RANK
    world = list(range(SIZE))
    x = torch.full((2,), float(RANK))
    assert hvd.allreduce(x, op=hvd.Sum, process_set=ps).tolist() == [float(sum(world))] * 2
    assert hvd.allreduce_(x.clone(), op=hvd.Max, process_set=ps, name="ps.max").tolist() == [SIZE - 1.0] * 2
    assert hvd.synchronize(hvd.allreduce_async(x, op=hvd.Min, process_set=ps)).tolist() == [0.0] * 2
    y = x.clone()
    assert hvd.synchronize(hvd.allreduce_async_(y, op=hvd.Sum, process_set=ps)) is y
    assert y.tolist() == [float(sum(world))] * 2
    outs = hvd.grouped_allreduce([x, torch.ones(1, dtype=torch.float32)], op=hvd.Sum, process_set=ps)
    assert outs[1].tolist() == [float(k)]
    assert hvd.allgather(torch.tensor([RANK]), process_set=ps).tolist() == world
    assert hvd.synchronize(hvd.allgather_async(torch.tensor([RANK]), process_set=ps)).tolist() == world
    assert hvd.broadcast(torch.tensor([RANK]), k - 1, process_set=ps).item() == SIZE - 1
    z = torch.tensor([RANK])
    hvd.synchronize(hvd.broadcast_async_(z, 0, process_set=ps))
    assert z.item() == 0
    t = torch.arange(k) + 10 * me
    assert hvd.alltoall(t, process_set=ps).tolist() == [10 * r + me for r in range(k)]
    rs = hvd.reducescatter(torch.ones(k, 2), op=hvd.Sum, process_set=ps)
    assert rs.tolist() == [[float(k)] * 2]
    hvd.barrier(process_set=ps)
    assert hvd.broadcast_object(RANK, root_rank=k - 1, process_set=ps) == SIZE - 1
    assert hvd.allgather_object(RANK, process_set=ps) == world
    model = torch.nn.Linear(2, 2)
    with torch.no_grad():
        model.weight.fill_(RANK)
        model.bias.fill_(RANK)
    hvd.broadcast_parameters(model.state_dict(), root_rank=k - 1, process_set=ps)
    assert model.weight.flatten().tolist() == [SIZE - 1.0] * 4
    # DistributedOptimizer on the set: one SGD step on the sum of every rank's gradient.
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=1.0), named_parameters=model.named_parameters(),
                                   op=hvd.Sum, process_set=ps)
    opt.zero_grad()
    model(torch.full((1, 2), float(RANK + 1))).sum().backward()
    opt.step()
    assert model.weight.flatten().tolist() == [(SIZE - 1.0) - sum(r + 1 for r in world)] * 4
    assert model.bias.tolist() == [(SIZE - 1.0) - SIZE] * 2


def test_async_errors_carry_libring_message(hvd):
    if SIZE == 1:
        pytest.skip("needs two ranks")
    h = hvd.allreduce_async(torch.ones(3 + RANK % 2), name="bad.async")
    with pytest.raises(hvd.HorovodInternalError, match="allreduce 'bad.async'.*elements") as e:
        hvd.synchronize(h)
    assert e.value.name == "RING_EMISMATCH"
    with pytest.raises(hvd.HorovodInternalError, match="RING_EMISMATCH"):  # the unnamed fast path
        hvd.allreduce(torch.ones(3 + RANK % 2))
    with pytest.raises(hvd.HorovodInternalError, match="RING_EMISMATCH: allgather 'bad.ag': .*dimensions after the "
                                                       "first differ"):
        hvd.synchronize(hvd.allgather_async(torch.ones(1, 2 + RANK % 2), name="bad.ag"))
    with pytest.raises(hvd.HorovodInternalError, match="RING_EMISMATCH"):
        hvd.broadcast_(torch.ones(2 + RANK % 2), 0, name="bad.bc")
    hvd.barrier()  # every rank is still in step after the errors
    assert hvd.allreduce(torch.ones(2), op=hvd.Sum).tolist() == [float(SIZE)] * 2


def _model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(5, 4), torch.nn.Tanh(), torch.nn.Linear(4, 3))


def _data(rank):
    g = torch.Generator().manual_seed(100 + rank)
    return torch.randn(8, 5, generator=g), torch.randn(8, 3, generator=g)


def _local_grads(model, rank, passes=1):
    model.zero_grad()
    for _ in range(passes):
        x, y = _data(rank)
        torch.nn.functional.mse_loss(model(x), y).backward()
    return [p.grad.clone() for p in model.parameters()]


def _reference_step(op=0, passes=1, lr=0.1):
    """Parameters after one SGD step on the gradients of every rank combined, serially."""
    ref = _model()
    grads = [_local_grads(ref, r, passes) for r in range(SIZE)]
    with torch.no_grad():
        for i, p in enumerate(ref.parameters()):
            g = sum(gs[i] for gs in grads)
            p -= lr * (g / SIZE if op == 1 else g)
    return [p.detach() for p in ref.parameters()]


@pytest.mark.parametrize("op,predivide", [(1, 1.0), (0, 1.0), (1, 4.0)], ids=["average", "sum", "predivide"])
def test_distributed_optimizer_matches_serial(hvd, op, predivide):
    model = _model()
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1), named_parameters=model.named_parameters(),
                                   op=op, gradient_predivide_factor=predivide)
    assert isinstance(opt, torch.optim.SGD)
    x, y = _data(RANK)
    opt.zero_grad()
    torch.nn.functional.mse_loss(model(x), y).backward()
    opt.step()
    for p, r in zip(model.parameters(), _reference_step(op)):
        torch.testing.assert_close(p.detach(), r, rtol=1e-5, atol=1e-6)
    assert "state" in opt.state_dict()


def test_distributed_optimizer_accumulates_backward_passes(hvd):
    model = _model()
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1), named_parameters=model.named_parameters(),
                                   backward_passes_per_step=2, op=hvd.Average)
    opt.zero_grad()
    for _ in range(2):
        x, y = _data(RANK)
        torch.nn.functional.mse_loss(model(x), y).backward()
    opt.step()
    for p, r in zip(model.parameters(), _reference_step(1, passes=2)):
        torch.testing.assert_close(p.detach(), r, rtol=1e-5, atol=1e-6)
    if SIZE > 1:  # one rank has nothing to reduce, and no hooks
        x, y = _data(RANK)
        for _ in range(2):
            torch.nn.functional.mse_loss(model(x), y).backward()
        with pytest.raises(AssertionError, match="backward_passes_per_step"):
            torch.nn.functional.mse_loss(model(x), y).backward()
        opt.synchronize()


def test_distributed_optimizer_rules(hvd):
    model = _model()
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9))  # unnamed
    x, y = _data(RANK)
    torch.nn.functional.mse_loss(model(x), y).backward()
    if SIZE > 1:
        with pytest.raises(AssertionError, match="zero_grad"):
            opt.zero_grad()
    opt.synchronize()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with opt.skip_synchronize():
            opt.step()
    opt.zero_grad()
    with pytest.raises(ValueError, match="does not name"):
        hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                 named_parameters=list(model.named_parameters())[:1])
    with pytest.raises(ValueError, match="unique"):
        hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                 named_parameters=[("w", p) for p in model.parameters()])
    with pytest.raises(ValueError, match="op=Average"):
        hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1), op=hvd.Sum,
                                 gradient_predivide_factor=2.0)
    with pytest.raises(TypeError, match="torch.optim.Optimizer"):
        hvd.DistributedOptimizer(model)


def test_distributed_optimizer_unused_parameter(hvd):
    torch.manual_seed(0)
    a, b = torch.nn.Linear(2, 2), torch.nn.Linear(2, 2)
    params = list(a.named_parameters(prefix="a")) + list(b.named_parameters(prefix="b"))
    opt = hvd.DistributedOptimizer(torch.optim.SGD([p for _, p in params], lr=1.0), named_parameters=params, op=hvd.Sum)
    opt.zero_grad(set_to_none=True)
    (a(torch.ones(1, 2)) if RANK == 0 else b(torch.ones(1, 2))).sum().backward()
    opt.step()
    assert a.bias.grad.tolist() == [1.0, 1.0]
    assert (b.bias.grad.tolist() if SIZE > 1 else b.bias.grad) == ([SIZE - 1.0] * 2 if SIZE > 1 else None)


@pytest.mark.parametrize("name", ["fp16", "bf16"])
def test_compression(hvd, name):
    comp = getattr(hvd.Compression, name)
    x = torch.full((5,), 1.0 + RANK / 3)
    out = hvd.allreduce(x, op=hvd.Sum, compression=comp, name="comp." + name)
    assert out.dtype == torch.float32
    torch.testing.assert_close(out, torch.full((5,), sum(1.0 + r / 3 for r in range(SIZE))), rtol=2e-2, atol=0)
    model = _model()
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1), named_parameters=model.named_parameters(),
                                   compression=comp)
    x, y = _data(RANK)
    torch.nn.functional.mse_loss(model(x), y).backward()
    opt.step()
    for p, r in zip(model.parameters(), _reference_step(1)):
        torch.testing.assert_close(p.detach(), r, rtol=0, atol=2e-3)
    assert hvd.Compression.none.compress(x)[0] is x


def test_wire_compression(hvd):
    from ringmaster import basics

    wire = basics.wire_compression()
    if wire is None:
        pytest.skip("libring runs without RING_COMPRESSION; ctest runs this again with RING_COMPRESSION=bf16")
    comp = hvd.Compression.bf16 if wire == "bf16" else hvd.Compression.fp16
    x = torch.full((4,), 1.0 + 2 ** -12)  # not a 16-bit value
    assert comp.compress(x)[0] is x  # no copy: the engine converts
    out = hvd.allreduce(x, op=hvd.Sum, name="wire")
    assert out.tolist() == [float(SIZE)] * 4  # rounded to 16 bits on the wire
    exact = hvd.allreduce(x.double(), op=hvd.Sum, name="wire64")  # only float32 is compressed
    assert exact[0].item() == SIZE * (1.0 + 2 ** -12)


def test_broadcast_helpers(hvd):
    torch.manual_seed(RANK)
    model = torch.nn.Sequential(torch.nn.Linear(3, 3), torch.nn.BatchNorm1d(3))
    model.train()
    model(torch.randn(4, 3))  # moves the batch-norm buffers apart on each rank
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    sd = model.state_dict()
    for k, v in sd.items():
        assert torch.equal(hvd.broadcast(v, 0, name="check." + k), v), k
    hvd.broadcast_parameters(model.named_parameters(), root_rank=SIZE - 1)
    opt = torch.optim.Adam(model.parameters(), lr=0.01 * (RANK + 1))
    if RANK == 0:  # only the root has state
        model(torch.randn(4, 3)).sum().backward()
        opt.step()
    hvd.broadcast_optimizer_state(opt, root_rank=0)
    assert opt.param_groups[0]["lr"] == 0.01
    assert len(opt.state) == len(list(model.parameters()))
    assert hvd.broadcast_object({"r": RANK}, root_rank=SIZE - 1) == {"r": SIZE - 1}
    assert hvd.allgather_object(RANK * 10) == [r * 10 for r in range(SIZE)]
    # a list of tensors (model.parameters()), as Horovod takes it
    ps = [torch.full((2,), float(RANK)), torch.full((1,), float(RANK + 1))]
    hvd.broadcast_parameters(ps, root_rank=SIZE - 1)
    assert ps[0].tolist() == [SIZE - 1.0] * 2 and ps[1].tolist() == [float(SIZE)]
    with pytest.raises(ValueError, match="state_dict"):
        hvd.broadcast_parameters(3)


def test_horovod_names(hvd):
    assert hvd.size() == SIZE and hvd.rank() == RANK and hvd.local_rank() >= 0 and hvd.cross_size() >= 1
    assert not hvd.nccl_built() and not hvd.mpi_threads_supported()
    assert hvd.is_initialized() and hvd.global_process_set.size() == SIZE
