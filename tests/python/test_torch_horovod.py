# SPDX-License-Identifier: Apache-2.0
"""ringmaster.torch as a drop-in for horovod.torch: what Horovod has that ringmaster lacked
before, with Horovod's semantics. Run as `ringrun -np N python3 -m pytest
test_torch_horovod.py` (ctest: np 2 and 3); every rank runs the same tests in order.

Covered: the exception classes and where ValueError comes; shape checks; int16, uint16 and
bool; process set removal; grouped allgather and reducescatter; the reducescatter gradient;
alltoall's even split of uneven tensors; world ranks as broadcast roots on sets; Adasum in
collectives and in DistributedOptimizer; sparse allreduce and the optimizer's sparse
gradients and groups; SyncBatchNorm; join; the optimizer's Horovod details."""
import warnings

import pytest
import torch

from conftest import world

RANK, SIZE = world()


def need(n):
    if SIZE < n:
        pytest.skip("needs %d ranks" % n)


# ---- exceptions ---------------------------------------------------------------------------


def test_exception_classes(hvd):
    assert issubclass(hvd.HorovodInternalError, RuntimeError)
    assert issubclass(hvd.RingError, hvd.HorovodInternalError)
    assert issubclass(hvd.RingValueError, hvd.RingError) and issubclass(hvd.RingValueError, ValueError)
    x = torch.zeros(4)
    ps = hvd.ProcessSet([SIZE - 1])
    with pytest.raises(ValueError, match="not registered"):
        hvd.allreduce(x, process_set=ps)
    with pytest.raises(ValueError, match="root %d is not a rank" % SIZE):
        hvd.broadcast(x, SIZE, name="bad.root")


@pytest.mark.parametrize("kind", ["allreduce", "allgather", "broadcast", "reducescatter", "alltoall"])
def test_duplicate_name_in_flight_is_a_value_error(hvd, kind):
    """Rank 0 starts an operation that cannot finish until the others start it too, then
    starts it again: ValueError, at once. Then the others join the first one."""
    need(2)
    x = torch.ones(SIZE, 3)
    start = {
        "allreduce": lambda: hvd.allreduce_async(x, name="dup." + kind),
        "allgather": lambda: hvd.allgather_async(x, name="dup." + kind),
        "broadcast": lambda: hvd.broadcast_async(x, 0, name="dup." + kind),
        "reducescatter": lambda: hvd.reducescatter_async(x, name="dup." + kind),
        "alltoall": lambda: hvd.alltoall_async(x, name="dup." + kind),
    }[kind]
    if RANK == 0:
        h = start()
        with pytest.raises(ValueError, match="in flight"):
            start()
    hvd.barrier()
    if RANK != 0:
        h = start()
    hvd.synchronize(h)
    hvd.barrier()


def test_shapes_must_agree(hvd):
    """The same number of elements in other shapes is a mismatch, as in Horovod."""
    need(2)
    x = torch.ones((2, 6) if RANK == 0 else (3, 4))
    with pytest.raises(hvd.HorovodInternalError, match="RING_EMISMATCH.*different shapes"):
        hvd.allreduce(x)
    with pytest.raises(RuntimeError, match="different shapes"):
        hvd.reducescatter(torch.ones((SIZE, 6) if RANK == 0 else (SIZE, 3, 2)), name="rs.shapes")
    with pytest.raises(RuntimeError, match="different shapes"):
        hvd.grouped_allreduce([torch.ones(3), x], name="grp.shapes")
    with pytest.raises(RuntimeError, match="different shapes"):
        hvd.broadcast_(x, 0, name="bc.shapes")
    # a 1-D tensor against a 2-D one of as many elements
    y = torch.ones(12) if RANK == 0 else torch.ones(3, 4)
    with pytest.raises(RuntimeError, match="different shapes"):
        hvd.allreduce(y, name="nd.shapes")
    # the same shape on every rank goes through, on the fast path too
    assert hvd.allreduce(torch.ones(3, 4), op=hvd.Sum).tolist() == [[float(SIZE)] * 4] * 3


# ---- dtypes -------------------------------------------------------------------------------


def test_int16_and_uint16(hvd):
    dtypes = [torch.int16] + ([torch.uint16] if hasattr(torch, "uint16") else [])
    for dt in dtypes:
        x = torch.tensor([RANK + 1, 300 + RANK, 7], dtype=dt)
        assert hvd.allreduce(x, op=hvd.Sum).tolist() == [SIZE * (SIZE + 1) // 2, 300 * SIZE + SIZE * (SIZE - 1) // 2,
                                                        7 * SIZE]
        assert hvd.allreduce(x, op=hvd.Min, name="i16.min").tolist() == [1, 300, 7]
        assert hvd.allreduce(x, op=hvd.Max, name="i16.max").tolist() == [SIZE, 300 + SIZE - 1, 7]
        assert hvd.allreduce(x).tolist()[2] == 7  # Average: 7 * size / size
        assert hvd.allgather(x[:1]).tolist() == [r + 1 for r in range(SIZE)]
        assert hvd.broadcast(x, SIZE - 1).tolist() == [SIZE, 300 + SIZE - 1, 7]
    big = torch.tensor([32000, -32000], dtype=torch.int16)
    assert hvd.allreduce(big, op=hvd.Sum, name="i16.wrap").dtype == torch.int16  # wraps, as ints do


def test_bool(hvd):
    """SUM and MAX are OR, PRODUCT and MIN are AND: results stay booleans."""
    x = torch.tensor([RANK == 0, True, False, RANK % 2 == 1])
    anyr = [True, True, False, SIZE > 1]
    allr = [SIZE == 1, True, False, False]
    assert hvd.allreduce(x, op=hvd.Sum).tolist() == anyr
    assert hvd.allreduce(x, op=hvd.Max, name="b.max").tolist() == anyr
    assert hvd.allreduce(x, op=hvd.Product, name="b.prod").tolist() == allr
    assert hvd.allreduce(x, op=hvd.Min, name="b.min").tolist() == allr
    y = x.clone()
    hvd.allreduce_(y, op=hvd.Sum)
    assert y.tolist() == anyr and y.dtype == torch.bool
    with pytest.raises(ValueError, match="bool"):
        hvd.allreduce(x)  # Average has no boolean result
    g = hvd.allgather(x)
    assert g.dtype == torch.bool and g.view(SIZE, 4)[:, 0].tolist() == [r == 0 for r in range(SIZE)]
    assert hvd.broadcast(x, SIZE - 1).tolist() == [SIZE == 1, True, False, (SIZE - 1) % 2 == 1]
    a = hvd.alltoall(torch.tensor([RANK % 2 == 0] * SIZE))
    assert a.tolist() == [r % 2 == 0 for r in range(SIZE)]


# ---- process sets -------------------------------------------------------------------------


def test_process_set_lifecycle(hvd):
    ps = hvd.ProcessSet([SIZE - 1, 0])
    assert ps.ranks == sorted({0, SIZE - 1}) and ps.size() is None and ps.rank() is None
    assert ps.included() == (RANK in ps.ranks)
    hvd.add_process_set(ps)
    with pytest.raises(ValueError, match="exists already"):
        hvd.add_process_set([0, SIZE - 1])
    if ps.included():
        assert hvd.allreduce(torch.ones(1), op=hvd.Sum, process_set=ps).item() == len(ps.ranks)
    first_id = ps.process_set_id
    assert hvd.remove_process_set(ps) is True
    assert ps.process_set_id is None and ps.size() is None
    assert hvd.remove_process_set(ps) is False
    assert hvd.remove_process_set(hvd.global_process_set) is False
    with pytest.raises(ValueError, match="not registered"):
        hvd.allreduce(torch.ones(1), process_set=ps)
    again = hvd.add_process_set([0, SIZE - 1])  # the ranks are free again, under a new id
    assert again.process_set_id != first_id
    assert hvd.remove_process_set(again)


def test_process_set_with_an_operation_in_flight_stays(hvd):
    """A rank with an operation in flight on the set refuses its removal, for every rank;
    once the operation is done, the removal goes through."""
    need(2)
    ps = hvd.add_process_set([0, 1])
    h = None
    if RANK == 0:
        h = hvd.allreduce_async(torch.ones(1), name="inflight", process_set=ps)
    with pytest.raises(ValueError, match="in flight|another rank"):
        hvd.remove_process_set(ps)
    if RANK == 1:
        h = hvd.allreduce_async(torch.ones(1), name="inflight", process_set=ps)
    if h is not None:
        hvd.synchronize(h)
    assert hvd.remove_process_set(ps)


def test_broadcast_roots_are_world_ranks_on_a_set(hvd):
    """Horovod's root_rank is a rank of the world even on a process set."""
    need(2)
    upper = hvd.add_process_set(list(range(1, SIZE)))
    if upper.included():
        x = torch.tensor([float(RANK)])
        assert hvd.broadcast(x, SIZE - 1, process_set=upper).item() == SIZE - 1
        assert hvd.broadcast_object(RANK, root_rank=1, process_set=upper) == 1
        with pytest.raises(ValueError, match="not in process set"):
            hvd.broadcast(x, 0, process_set=upper)
        y = torch.tensor([float(RANK)], requires_grad=True)
        hvd.broadcast(y, 1, process_set=upper).sum().backward()
        assert y.grad.item() == (1.0 if RANK == 1 else 0.0)
    hvd.barrier()
    hvd.remove_process_set(upper)


# ---- grouped allgather and reducescatter --------------------------------------------------


def test_grouped_allgather(hvd):
    """Members of different dtypes and row counts, gathered as one."""
    xs = [torch.full((RANK + 1, 2), float(RANK)), torch.arange(RANK + 2, dtype=torch.int16),
          torch.tensor([RANK % 2 == 0])]
    for outs in (hvd.grouped_allgather(xs), hvd.synchronize(hvd.grouped_allgather_async(xs, name="gag"))):
        assert outs[0].shape == (SIZE * (SIZE + 1) // 2, 2)
        assert outs[0][:, 0].tolist() == [float(r) for r in range(SIZE) for _ in range(r + 1)]
        assert outs[1].dtype == torch.int16 and outs[1].tolist() == [i for r in range(SIZE) for i in range(r + 2)]
        assert outs[2].tolist() == [r % 2 == 0 for r in range(SIZE)]
    assert hvd.grouped_allgather([]) == []
    if SIZE > 1:
        with pytest.raises(RuntimeError, match="member 1"):
            hvd.grouped_allgather([torch.ones(1), torch.ones(1, 2 + RANK % 2)], name="gag.bad")


def test_grouped_allgather_gradient(hvd):
    """Each member's gradient is its own rows of the averaged gradient."""
    xs = [torch.ones(RANK + 1, 3, requires_grad=True), torch.ones(2, requires_grad=True)]
    outs = hvd.grouped_allgather(xs)
    weights = [torch.arange(o.shape[0], dtype=torch.float32).reshape(-1, *([1] * (o.dim() - 1))) for o in outs]
    sum((o * w).sum() for o, w in zip(outs, weights)).backward()
    off = RANK * (RANK + 1) // 2
    assert xs[0].grad[:, 0].tolist() == [float(off + i) for i in range(RANK + 1)]
    assert xs[1].grad.tolist() == [float(2 * RANK), float(2 * RANK + 1)]


@pytest.mark.parametrize("rows", [1, 3, 7])
def test_grouped_reducescatter(hvd, rows):
    """Members with uneven row counts: rank r gets its share of each, as a reducescatter of
    each would give it."""
    xs = [torch.arange(rows * 2, dtype=torch.float64).reshape(rows, 2) + RANK,
          torch.full((SIZE + 1,), float(RANK + 1), dtype=torch.float64)]
    outs = hvd.grouped_reducescatter(xs, op=hvd.Sum)
    for x, o in zip(xs, outs):
        want = hvd.reducescatter(x, op=hvd.Sum)
        assert o.shape == want.shape and torch.equal(o, want)
    outs = hvd.synchronize(hvd.grouped_reducescatter_async(xs, name="grs", prescale_factor=2.0,
                                                           postscale_factor=0.25))
    for x, o in zip(xs, outs):
        torch.testing.assert_close(o, hvd.reducescatter(x) * 2.0 * 0.25, rtol=1e-12, atol=0)
    with pytest.raises(TypeError, match="one dtype"):
        hvd.grouped_reducescatter([torch.ones(2), torch.ones(2, dtype=torch.int32)])


@pytest.mark.parametrize("op", ["sum", "average"])
def test_reducescatter_gradients(hvd, op):
    """Horovod's: the gradient gathered back, times the set's size for Sum, and the scale
    factors; grouped alike."""
    code = hvd.Sum if op == "sum" else hvd.Average
    x = torch.ones(SIZE * 2, 3, requires_grad=True)
    (hvd.reducescatter(x, op=code, prescale_factor=2.0) * (RANK + 1)).sum().backward()
    factor = (SIZE if op == "sum" else 1) * 2.0
    assert x.grad[:, 0].tolist() == [factor * (r + 1) for r in range(SIZE) for _ in range(2)]
    ys = [torch.ones(SIZE, requires_grad=True), torch.ones(SIZE, 2, requires_grad=True)]
    sum(o.sum() * (RANK + 1) for o in hvd.grouped_reducescatter(ys, op=code)).backward()
    factor = SIZE if op == "sum" else 1
    assert ys[0].grad.tolist() == [float(factor * (r + 1)) for r in range(SIZE)]
    assert ys[1].grad[:, 1].tolist() == [float(factor * (r + 1)) for r in range(SIZE)]


# ---- alltoall -----------------------------------------------------------------------------


def test_alltoall_even_split_of_uneven_tensors(hvd):
    """Without splits each rank splits its own rows evenly: rank r sends r + 1 rows to each
    rank, which so receives different counts from each."""
    x = torch.cat([torch.full((RANK + 1, 2), float(10 * RANK + j)) for j in range(SIZE)])
    out = hvd.alltoall(x)
    assert out[:, 0].tolist() == [float(10 * r + RANK) for r in range(SIZE) for _ in range(r + 1)]
    out, got = hvd.synchronize(hvd.alltoall_async(x, name="a2a.even"))
    assert got.dtype == torch.int32 and got.tolist() == [r + 1 for r in range(SIZE)]
    y = x.clone().requires_grad_()
    (hvd.alltoall(y) * (RANK + 1)).sum().backward()
    assert y.grad[:, 0].tolist() == [float(j + 1) for j in range(SIZE) for _ in range(RANK + 1)]


def test_alltoall_splits_arguments(hvd):
    x = torch.arange(SIZE + 1, dtype=torch.float32)
    out, got = hvd.alltoall(x, splits=[1] * SIZE)  # a list; the last row stays home
    assert got.dtype == torch.int32 and got.tolist() == [1] * SIZE
    assert out.tolist() == [float(RANK)] * SIZE
    out, got = hvd.alltoall(x[:SIZE], splits=torch.ones(SIZE, dtype=torch.int64))
    assert got.dtype == torch.int64
    with pytest.raises(ValueError, match="integers"):
        hvd.alltoall(x, splits=torch.ones(SIZE))
    with pytest.raises(ValueError, match="at most"):
        hvd.alltoall(x, splits=[2] * SIZE)


# ---- Adasum -------------------------------------------------------------------------------


def _adasum_pair(a, b):
    dot, aa, bb = float(a @ b), float(a @ a), float(b @ b)
    ca = 1.0 if aa < 1e-300 else 1.0 - dot / (2 * aa)
    cb = 1.0 if bb < 1e-300 else 1.0 - dot / (2 * bb)
    return ca * a + cb * b


def _adasum_reference(vs):
    """libring's tree: ranks past the largest power of two fold into rank - p first, then
    pairs at distance 1, 2, 4..."""
    vs = [v.double() for v in vs]
    p = 1
    while p * 2 <= len(vs):
        p *= 2
    for r in range(p, len(vs)):
        vs[r - p] = _adasum_pair(vs[r - p], vs[r])
    d = 1
    while d < p:
        for r in range(0, p, 2 * d):
            vs[r] = _adasum_pair(vs[r], vs[r + d])
        d *= 2
    return vs[0]


def test_adasum_properties(hvd):
    v = torch.tensor([1.0, -2.0, 3.0, 0.5])
    # equal vectors: Adasum is their common value, not their sum
    torch.testing.assert_close(hvd.allreduce(v, op=hvd.Adasum), v, rtol=1e-6, atol=0)
    # orthogonal vectors: their sum
    e = torch.zeros(SIZE)
    e[RANK] = RANK + 1.0
    torch.testing.assert_close(hvd.allreduce(e, op=hvd.Adasum, name="ada.orth"),
                               torch.arange(1.0, SIZE + 1.0), rtol=1e-6, atol=0)
    # a zero vector counts for nothing
    z = v * (RANK + 1) if RANK == 0 else torch.zeros(4)
    torch.testing.assert_close(hvd.allreduce(z, op=hvd.Adasum, name="ada.zero"), v, rtol=1e-6, atol=0)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32, torch.float64], ids=str)
def test_adasum_matches_the_reference(hvd, dtype):
    g = torch.Generator().manual_seed(7 + RANK)
    xs = [torch.randn(n, generator=g).to(dtype) for n in (5, 33, 1)]
    every = [hvd.allgather(x.unsqueeze(0).double(), name="ada.in.%d" % i) for i, x in enumerate(xs)]
    tol = {torch.float16: 2e-2, torch.bfloat16: 6e-2, torch.float32: 1e-5, torch.float64: 1e-12}[dtype]
    outs = [hvd.allreduce(xs[0], op=hvd.Adasum)]
    outs += hvd.grouped_allreduce(xs[1:], op=hvd.Adasum)  # each member on its own
    for o, e in zip(outs, every):
        want = _adasum_reference(list(e))
        assert o.dtype == dtype
        torch.testing.assert_close(o.double(), want, rtol=tol, atol=tol * float(want.abs().max()))
    # bitwise the same everywhere
    assert hvd.allreduce(outs[0].float(), op=hvd.Max, name="ada.max").equal(outs[0].float())
    with pytest.raises(RuntimeError):
        hvd.reducescatter(xs[0].float(), op=hvd.Adasum)


def test_adasum_optimizer_reduces_steps(hvd):
    """op=Adasum: each rank's SGD step, combined with Adasum; with the same gradient on
    every rank that is one plain step, with different ones the reference combination."""
    for same in (True, False):
        torch.manual_seed(0)
        model = torch.nn.Linear(4, 2)
        start = [p.detach().clone() for p in model.parameters()]
        opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.5),
                                       named_parameters=model.named_parameters(), op=hvd.Adasum)
        x = torch.ones(3, 4) * (1 if same else RANK + 1)
        opt.zero_grad()
        model(x).pow(2).sum().backward()
        grads = [p.grad.detach().clone() for p in model.parameters()]
        opt.step()
        for p, s, g in zip(model.parameters(), start, grads):
            deltas = hvd.allgather((-0.5 * g).unsqueeze(0).double(), name="ada.delta")
            want = s.double() + (_adasum_reference(list(deltas.flatten(1))).view_as(s) if SIZE > 1
                                 else -0.5 * g.double())
            torch.testing.assert_close(p.detach().double(), want, rtol=1e-5, atol=1e-6)


# ---- sparse -------------------------------------------------------------------------------


def test_sparse_allreduce_async(hvd):
    g = torch.Generator().manual_seed(RANK)
    dense = torch.rand(6, 3, generator=g)
    dense[dense < 0.6] = 0
    for op in (hvd.Sum, hvd.Average):
        handle = hvd.sparse_allreduce_async(dense.to_sparse(), name="sp.%d" % op, op=op)
        got = handle()
        assert got.is_sparse
        torch.testing.assert_close(got.to_dense(), hvd.allreduce(dense, op=op), rtol=1e-6, atol=1e-7)


def _embedding_model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Embedding(10, 3, sparse=True), torch.nn.Linear(3, 1))


@pytest.mark.parametrize("as_dense", [False, True], ids=["sparse", "dense"])
def test_optimizer_sparse_gradients(hvd, as_dense):
    """An Embedding's sparse gradient is averaged like a dense one would be."""
    model = _embedding_model()
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=1.0),
                                   named_parameters=model.named_parameters(), sparse_as_dense=as_dense)
    idx = torch.tensor([[RANK % 10, (RANK + 3) % 10, 7]])
    opt.zero_grad()
    model(idx).sum().backward()
    assert model[0].weight.grad.is_sparse
    opt.step()
    ref = _embedding_model()
    grads = []
    for r in range(SIZE):
        ref.zero_grad()
        ref(torch.tensor([[r % 10, (r + 3) % 10, 7]])).sum().backward()
        grads.append(ref[0].weight.grad.to_dense())
    want = _embedding_model()[0].weight.detach() - sum(grads) / SIZE
    torch.testing.assert_close(model[0].weight.detach(), want, rtol=1e-5, atol=1e-6)


def test_optimizer_groups_and_names(hvd):
    """groups (a count, or lists of parameters) change how the gradients travel, not what
    they add up to; _parameter_names is Horovod's map of parameter to name."""
    results = []
    for groups in (None, 2, "list"):
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Linear(4, 2))
        grp = [[model[0].weight, model[1].bias]] if groups == "list" else groups
        opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                       named_parameters=model.named_parameters(), groups=grp)
        names = opt._parameter_names
        assert len(names) == 4 and len(set(names.values())) == 4 and names[model[0].weight] == "0.weight"
        opt.zero_grad()
        model(torch.full((2, 3), float(RANK + 1))).sum().backward()
        opt.step()
        results.append([p.detach().clone() for p in model.parameters()])
    for other in results[1:]:
        for a, b in zip(results[0], other):
            torch.testing.assert_close(a, b, rtol=1e-6, atol=1e-7)
    with pytest.raises(ValueError, match="groups"):
        hvd.DistributedOptimizer(torch.optim.SGD(torch.nn.Linear(1, 1).parameters(), lr=0.1), groups="two")
    with warnings.catch_warnings(record=True) as ws:
        warnings.simplefilter("always")
        hvd.DistributedOptimizer(torch.optim.SGD(torch.nn.Linear(1, 1).parameters(), lr=0.1), num_groups=1)
    assert any(issubclass(w.category, DeprecationWarning) for w in ws)


def test_optimizer_step_after_synchronize_warns(hvd):
    need(2)
    model = torch.nn.Linear(2, 1)
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                   named_parameters=model.named_parameters())
    model(torch.ones(1, 2)).sum().backward()
    opt.synchronize()
    with warnings.catch_warnings(record=True) as ws:
        warnings.simplefilter("always")
        opt.step()
    assert len(ws) == 1
    assert str(ws[0].message).startswith("optimizer.step() called without optimizer.skip_synchronize()")


def test_optimizer_outside_its_process_set_steps_locally(hvd):
    need(2)
    ps = hvd.add_process_set([0])
    model = torch.nn.Linear(2, 1, bias=False)
    with torch.no_grad():
        model.weight.fill_(1.0)
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=1.0),
                                   named_parameters=model.named_parameters(), op=hvd.Sum, process_set=ps)
    model(torch.full((1, 2), float(RANK + 1))).sum().backward()
    opt.step()  # rank 0 reduces over a set of one, the others step alone
    assert model.weight.flatten().tolist() == [-float(RANK)] * 2
    hvd.barrier()
    hvd.remove_process_set(ps)


# ---- SyncBatchNorm ------------------------------------------------------------------------


@pytest.mark.parametrize("shape", [(3, 4), (2, 4, 5)], ids=["1d", "2d-like"])
def test_sync_batch_norm_matches_the_global_batch(hvd, shape):
    """Every rank's batch normalized together: the output, the running statistics and the
    input gradient are those of BatchNorm over the concatenated batch; the weight gradient
    averaged over the ranks is the serial one's over the ranks' mean loss."""
    batches = [torch.randn(*shape, generator=torch.Generator().manual_seed(r)) * (r + 1) + r for r in range(SIZE)]
    sbn = hvd.SyncBatchNorm(4, momentum=0.3)
    bn = torch.nn.BatchNorm1d(4, momentum=0.3)
    x = batches[RANK].clone().requires_grad_()
    xs = torch.cat(batches).requires_grad_()
    out = sbn(x)
    ref = bn(xs)
    n = shape[0]
    torch.testing.assert_close(out, ref[RANK * n : (RANK + 1) * n], rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(sbn.running_mean, bn.running_mean, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(sbn.running_var, bn.running_var, rtol=1e-5, atol=1e-6)
    w = torch.randn(*shape, generator=torch.Generator().manual_seed(100))
    (out * w).sum().backward()
    (ref * w.repeat(SIZE, *([1] * (len(shape) - 1)))).sum().backward()
    torch.testing.assert_close(x.grad, xs.grad[RANK * n : (RANK + 1) * n], rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(hvd.allreduce(sbn.weight.grad, op=hvd.Sum), bn.weight.grad, rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(hvd.allreduce(sbn.bias.grad, op=hvd.Sum), bn.bias.grad, rtol=1e-4, atol=1e-5)
    sbn.eval()
    bn.eval()
    torch.testing.assert_close(sbn(batches[0]), bn(batches[0]), rtol=1e-5, atol=1e-5)


def test_sync_batch_norm_refuses_1d_input(hvd):
    with pytest.raises(ValueError, match="2D"):
        hvd.SyncBatchNorm(3)(torch.ones(3))


# ---- join ---------------------------------------------------------------------------------


def test_join_as_horovod(hvd):
    """Rank r runs r + 1 steps, then joins. Average divides by the world's size, joined
    ranks adding zeros; allgathers and broadcasts fail while a rank has joined."""
    need(2)
    for step in range(RANK + 1):
        working = SIZE - step
        out = hvd.allreduce(torch.full((3,), 6.0), name="join.avg")
        assert out.tolist() == [6.0 * working / SIZE] * 3
        if step > 0:
            with pytest.raises(RuntimeError, match="joined"):
                hvd.allgather(torch.ones(1), name="join.ag")
            with pytest.raises(RuntimeError, match="joined"):
                hvd.broadcast(torch.ones(1), SIZE - 1, name="join.bc")
    last = hvd.join()
    assert last == SIZE - 1 and hvd.allgather_object(last) == [SIZE - 1] * SIZE


# ---- init ---------------------------------------------------------------------------------


def test_init_comm_argument(hvd):
    hvd.init(comm=list(range(SIZE)))  # every rank: fine, and a no-op now
    hvd.init(process_sets=None)
    with pytest.raises(ValueError, match="MPI communicator"):
        hvd.init(comm=object())
    if SIZE > 1:
        with pytest.raises(ValueError, match="ProcessSet"):
            hvd.init(comm=[0])
