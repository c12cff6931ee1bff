#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""ddp_synthetic - the protocol of Horovod's pytorch_synthetic_benchmark.py over
torch.nn.parallel.DistributedDataParallel (gloo), on the CPU, so that horovod_synthetic.sh
can print the two side by side: a torchvision model (1000 classes) on fixed random 224x224
images, SGD at lr 0.01 x size, warm-up batches, then iterations of timed batches. Rank 0
prints one JSON row with the total images per second over the ranks (mean of the
iterations) and Horovod's 1.96-sigma spread.

  ringrun -np 2 /usr/bin/python3 ddp_synthetic.py --model resnet18 --port 29500
"""
import argparse
import json
import os
import statistics
import timeit

import torch
import torch.distributed as dist
import torch.nn.functional as F


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--model", default="resnet18")
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--num-warmup-batches", type=int, default=10)
    p.add_argument("--num-batches-per-iter", type=int, default=10)
    p.add_argument("--num-iters", type=int, default=10)
    p.add_argument("--fp16-allreduce", action="store_true", help="DDP's fp16 compression hook")
    p.add_argument("--port", type=int, default=29500)
    args = p.parse_args()
    rank, size = int(os.environ.get("RING_RANK", 0)), int(os.environ.get("RING_SIZE", 1))
    import torchvision

    dist.init_process_group("gloo", init_method="tcp://127.0.0.1:%d" % args.port, rank=rank, world_size=size)
    model = torch.nn.parallel.DistributedDataParallel(getattr(torchvision.models, args.model)())
    if args.fp16_allreduce:
        from torch.distributed.algorithms.ddp_comm_hooks import default_hooks

        model.register_comm_hook(None, default_hooks.fp16_compress_hook)
    opt = torch.optim.SGD(model.parameters(), lr=0.01 * size)
    data = torch.randn(args.batch_size, 3, 224, 224)
    target = torch.LongTensor(args.batch_size).random_() % 1000

    def step():
        opt.zero_grad()
        F.cross_entropy(model(data), target).backward()
        opt.step()

    timeit.timeit(step, number=args.num_warmup_batches)
    rates = [args.batch_size * args.num_batches_per_iter / timeit.timeit(step, number=args.num_batches_per_iter)
             for _ in range(args.num_iters)]
    dist.barrier()
    if rank == 0:
        mean = statistics.mean(rates)
        conf = 1.96 * statistics.pstdev(rates)
        print(json.dumps({"bench": "torch-synthetic", "impl": "ddp-gloo", "np": size, "model": args.model,
                          "batch": args.batch_size, "images_per_s": round(size * mean, 2),
                          "conf_images_per_s": round(size * conf, 2)}, separators=(",", ":")), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
