#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""bench_torch - data-parallel training steps per second on synthetic input, one way per run:

  --impl single      one process, no communication: the bound
  --impl ddp-gloo    torch.nn.parallel.DistributedDataParallel over the gloo backend
  --impl ringmaster  ringmaster.torch.DistributedOptimizer over libring

  ringrun -np 2 /usr/bin/python3 bench_torch.py --impl ringmaster --model resnet18

Every rank runs one torch thread (--threads), as many ranks as cores. Rank 0 times each
step after --warmup steps and prints one JSON row with the median.

  --impl call: the binding's overhead instead: the median time of a 4 KiB float32 sum
  allreduce_ through ringmaster.torch, the loop bench_call.c runs in C (and of the
  out-of-place allreduce, which allocates its result).
"""
import argparse
import json
import os
import statistics
import sys
import time

import torch
import torch.nn.functional as F


def model_of(name):
    if name == "resnet18":
        try:
            import torchvision

            return torchvision.models.resnet18(weights=None, num_classes=10), (3, 32, 32)
        except ImportError:
            sys.exit("bench_torch: resnet18 needs python3-torchvision")
    if name == "mlp":
        return torch.nn.Sequential(torch.nn.Linear(784, 256), torch.nn.ReLU(), torch.nn.Linear(256, 256),
                                   torch.nn.ReLU(), torch.nn.Linear(256, 10)), (784,)
    sys.exit("bench_torch: unknown --model %s" % name)


def train(args):
    rank, size = int(os.environ.get("RING_RANK", 0)), int(os.environ.get("RING_SIZE", 1))
    torch.manual_seed(0)
    model, shape = model_of(args.model)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    if args.impl == "ddp-gloo":
        import torch.distributed as dist

        dist.init_process_group("gloo", init_method="tcp://127.0.0.1:%d" % args.port, rank=rank, world_size=size)
        model = torch.nn.parallel.DistributedDataParallel(model)
        sync = dist.barrier
    elif args.impl == "ringmaster":
        import ringmaster.torch as rt

        rt.init()
        rt.broadcast_parameters(model.state_dict(), root_rank=0)
        opt = rt.DistributedOptimizer(opt, named_parameters=model.named_parameters())
        sync = rt.barrier
    else:
        if size != 1:
            sys.exit("bench_torch: --impl single runs one process")
        sync = lambda: None
    g = torch.Generator().manual_seed(rank)
    x = torch.randn((args.batch,) + shape, generator=g)
    y = torch.randint(0, 10, (args.batch,), generator=g)
    times = []
    sync()
    for i in range(args.warmup + args.steps):
        t0 = time.perf_counter()
        opt.zero_grad()
        F.cross_entropy(model(x), y).backward()
        opt.step()
        if i >= args.warmup:
            times.append(time.perf_counter() - t0)
    sync()
    med = statistics.median(times)
    return {"bench": "torch", "impl": args.label or args.impl, "model": args.model, "np": size, "batch": args.batch,
            "params": sum(p.numel() for p in model.parameters()), "steps": args.steps,
            "median_step_s": round(med, 6), "steps_per_s": round(1.0 / med, 3)}


def call(args):
    """Rows for allreduce_ (in place: the call bench_call.c makes from C) and for the
    out-of-place allreduce, which also allocates its result."""
    import ringmaster.torch as rt

    rt.init()
    t = torch.ones(1024, dtype=torch.float32)
    rows = []
    for impl, fn in (("ringmaster.torch", rt.allreduce_), ("ringmaster.torch-out-of-place", rt.allreduce)):
        times = []
        for i in range(args.warmup + args.steps):
            t0 = time.perf_counter()
            fn(t, op=rt.Sum)
            if i >= args.warmup:
                times.append(time.perf_counter() - t0)
        rows.append({"bench": "torch-call", "impl": impl, "np": rt.size(), "bytes": 4096, "iters": args.steps,
                     "median_us": round(statistics.median(times) * 1e6, 2)})
    rt.barrier()
    return rows


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--impl", choices=["single", "ddp-gloo", "ringmaster", "call"], required=True)
    p.add_argument("--model", choices=["resnet18", "mlp"], default="mlp")
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--port", type=int, default=29500)
    p.add_argument("--label", help="the row's impl (default: --impl)")
    p.add_argument("--version", action="version", version="bench_torch (Ringmaster) 0.1.0")
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    rows = call(args) if args.impl == "call" else [train(args)]
    if int(os.environ.get("RING_RANK", 0)) == 0:
        for row in rows:
            print(json.dumps(row, separators=(",", ":")), flush=True)


if __name__ == "__main__":
    main()
