#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""torch_digits - the PyTorch example trainer: an MLP on scikit-learn's bundled digits
(1797 8x8 images of handwritten digits, shipped inside python3-sklearn: nothing is
downloaded), data-parallel on libring through ringmaster.torch.

    ringrun -np 4 /usr/bin/python3 worker/examples/torch_digits.py --epochs 20

- A fixed split (seed 0) keeps 360 images for testing; the other 1437 train.
- Each epoch shuffles with (seed, epoch); a DistributedSampler gives rank r every size-th
  image of that order, so the ranks' batches together form one global batch.
- The learning rate is scaled by the world size (the local batch stays fixed), and
  DistributedOptimizer averages the gradients.
- Checkpoints ($RING_CHECKPOINT_DIR or --checkpoint-dir) hold the model, the optimizer's
  state, the epoch and the images of it consumed: nothing tied to the world size, so a job
  stopped at 4 ranks resumes at 2. Rank 0 writes them atomically after every epoch and on
  a stop (SIGTERM to any rank: every rank stops after the same step and exits 75).
- Rank 0 writes $RING_RUN_DIR/progress.json and prints, last,
  "final loss L accuracy A" (the test set's loss and accuracy).

Exit status: 0 done, 75 stopped (resumable), 1 error, 2 bad arguments.
"""
import argparse
import os
import sys
import time

import torch
import torch.nn.functional as F
from sklearn.datasets import load_digits
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

import ringmaster.torch as rt


class ResumableSampler(DistributedSampler):
    """DistributedSampler that can start an epoch part-way: positions before `start` of
    the epoch's order were trained on before a stop, by however many ranks there were."""

    def __init__(self, dataset, num_replicas, rank, seed):
        super().__init__(dataset, num_replicas=num_replicas, rank=rank, shuffle=True, seed=seed, drop_last=True)
        self.start = 0

    def set_start(self, start):
        self.start = start

    def __iter__(self):
        g = torch.Generator()
        g.manual_seed(self.seed + self.epoch)
        order = torch.randperm(len(self.dataset), generator=g)[self.start :].tolist()
        usable = len(order) // self.num_replicas * self.num_replicas
        return iter(order[self.rank : usable : self.num_replicas])

    def __len__(self):
        return (len(self.dataset) - self.start) // self.num_replicas


def parse():
    p = argparse.ArgumentParser(description="Data-parallel MLP on scikit-learn's digits, on libring.")
    p.add_argument("--epochs", type=int, default=20)
    p.add_argument("--batch", type=int, default=16, help="images per rank per step")
    p.add_argument("--lr", type=float, default=0.02, help="learning rate of one rank (scaled by the size)")
    p.add_argument("--hidden", type=int, default=64)
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--checkpoint-dir", default=os.environ.get("RING_CHECKPOINT_DIR"))
    p.add_argument("--fresh", action="store_true", help="ignore an existing checkpoint")
    p.add_argument("--step-sleep-ms", type=float, default=0, help="sleep after each step (tests)")
    p.add_argument("--compression", choices=["none", "fp16", "bf16"], default="none")
    p.add_argument("--version", action="version", version="torch_digits (Ringmaster example) 0.1.0")
    a = p.parse_args()
    for name in ("epochs", "batch", "hidden"):
        if getattr(a, name) < 1:
            p.error("--%s must be at least 1" % name)
    if not a.lr > 0:
        p.error("--lr must be positive")
    return a


def data():
    d = load_digits()
    x = torch.tensor(d.data, dtype=torch.float32) / 16.0
    y = torch.tensor(d.target, dtype=torch.int64)
    order = torch.randperm(len(y), generator=torch.Generator().manual_seed(0))
    test, train = order[:360], order[360:]
    return TensorDataset(x[train], y[train]), (x[test], y[test])


def evaluate(model, test, rank, size):
    """Loss and accuracy over the whole test set: each rank its share, then one sum."""
    x, y = test[0][rank::size], test[1][rank::size]
    with torch.no_grad():
        out = model(x)
        t = torch.tensor([F.cross_entropy(out, y, reduction="sum").item(),
                          (out.argmax(1) == y).sum().item(), len(y)], dtype=torch.float64)
    t = rt.allreduce(t, op=rt.Sum, name="eval")
    return (t[0] / t[2]).item(), (t[1] / t[2]).item()


def main():
    args = parse()
    torch.set_num_threads(1)  # one core per rank; ringrun starts one rank per slot
    rt.init()
    rank, size = rt.rank(), rt.size()
    train, test = data()
    torch.manual_seed(args.seed)
    model = torch.nn.Sequential(torch.nn.Linear(64, args.hidden), torch.nn.ReLU(), torch.nn.Linear(args.hidden, 10))
    opt = torch.optim.SGD(model.parameters(), lr=args.lr * size, momentum=0.9)

    job = rt.Resumable(args.checkpoint_dir)
    epoch, consumed = 0, 0
    state = None if args.fresh else job.restore()
    if state is not None:
        if (state["hidden"], state["seed"]) != (args.hidden, args.seed):
            if rank == 0:
                print("torch_digits: %s is for --hidden %d --seed %d, not %d and %d; use another "
                      "--checkpoint-dir or --fresh" % (job.path, state["hidden"], state["seed"], args.hidden,
                                                         args.seed), file=sys.stderr)
            rt.shutdown()
            return 2
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["optimizer"])
        epoch, consumed = state["epoch"], state["consumed"]
        if rank == 0:
            print("resuming from %s at epoch %d (+%d samples) on %d rank%s"
                  % (job.path, epoch, consumed, size, "" if size == 1 else "s"), flush=True)
    # The learning rate depends on the world size, which may have changed since the
    # checkpoint: set it again after loading the optimizer's state.
    for group in opt.param_groups:
        group["lr"] = args.lr * size
    rt.broadcast_parameters(model.state_dict(), root_rank=0)
    rt.broadcast_optimizer_state(opt, root_rank=0)
    opt = rt.DistributedOptimizer(opt, named_parameters=model.named_parameters(),
                                  compression=getattr(rt.Compression, args.compression))

    sampler = ResumableSampler(train, size, rank, args.seed)
    loader = DataLoader(train, batch_size=args.batch, sampler=sampler, drop_last=True)
    global_batch = args.batch * size
    steps_per_epoch = len(train) // global_batch
    loss, acc = evaluate(model, test, rank, size)
    if rank == 0:
        print("start: %d samples, %d parameters, %d rank%s, lr %g x %d, loss %.4f"
              % (len(train), sum(p.numel() for p in model.parameters()), size, "" if size == 1 else "s",
                 args.lr, size, loss), flush=True)

    def checkpoint(epoch, consumed):
        return {"model": model.state_dict(), "optimizer": opt.state_dict(), "epoch": epoch,
                "consumed": consumed, "hidden": args.hidden, "seed": args.seed}

    while epoch < args.epochs:
        sampler.set_epoch(epoch)
        sampler.set_start(consumed)
        t0, done = time.time(), 0
        model.train()
        for x, y in loader:
            opt.zero_grad()
            F.cross_entropy(model(x), y).backward()
            opt.step()
            consumed += global_batch
            done += global_batch
            job.stop_point(lambda: checkpoint(epoch, consumed))
            if args.step_sleep_ms > 0:
                time.sleep(args.step_sleep_ms / 1000.0)
        epoch, consumed = epoch + 1, 0
        model.eval()
        loss, acc = evaluate(model, test, rank, size)
        dt = time.time() - t0
        job.save(checkpoint(epoch, 0))
        job.progress(epoch, args.epochs, epoch * steps_per_epoch, args.epochs * steps_per_epoch, loss,
                     done / dt if dt > 0 else 0)
        if rank == 0:
            print("epoch %d/%d loss %.4f accuracy %.3f (%.0f samples/s)" % (epoch, args.epochs, loss, acc,
                                                                           done / dt if dt > 0 else 0), flush=True)
    if rank == 0:
        print("final loss %.6f accuracy %.4f" % (loss, acc), flush=True)
    rt.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
