#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""horovod_digits - a training script as a Horovod user writes it, on scikit-learn's
bundled digits. Its only difference from a horovod.torch script is the import line
(tests/python/test_examples.py checks that it is the only line that names ringmaster):

    import ringmaster.torch as hvd     # was: import horovod.torch as hvd

    ringrun -np 2 /usr/bin/python3 worker/examples/horovod_digits.py --epochs 10
"""
import argparse

import torch
import torch.nn.functional as F
from sklearn.datasets import load_digits
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

import ringmaster.torch as hvd


def arguments():
    p = argparse.ArgumentParser(description="digits, data-parallel, Horovod style")
    p.add_argument("--epochs", type=int, default=10)
    p.add_argument("--batch-size", type=int, default=16, help="per worker")
    p.add_argument("--lr", type=float, default=0.02, help="for one worker; scaled by hvd.size()")
    p.add_argument("--momentum", type=float, default=0.9)
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--fp16-allreduce", action="store_true", help="compress gradients to float16")
    p.add_argument("--predivide", type=float, default=1.0, help="gradient_predivide_factor")
    return p.parse_args()


def digits():
    d = load_digits()
    images = torch.tensor(d.data, dtype=torch.float32) / 16.0
    labels = torch.tensor(d.target)
    order = torch.randperm(len(labels), generator=torch.Generator().manual_seed(0))
    held_out, rest = order[:360], order[360:]
    return TensorDataset(images[rest], labels[rest]), TensorDataset(images[held_out], labels[held_out])


class Classifier(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.hidden = torch.nn.Linear(64, 64)
        self.out = torch.nn.Linear(64, 10)

    def forward(self, x):
        x = F.dropout(F.relu(self.hidden(x)), p=0.1, training=self.training)
        return F.log_softmax(self.out(x), dim=1)


def averaged(value, name):
    """The mean of value over the workers."""
    return hvd.allreduce(torch.tensor(value), name=name).item()


def main():
    args = arguments()
    hvd.init()
    torch.manual_seed(args.seed)
    torch.set_num_threads(1)  # the workers share the machine's cores

    train_set, test_set = digits()
    # Each worker trains on its own share of every epoch, and tests on its share.
    train_sampler = DistributedSampler(train_set, num_replicas=hvd.size(), rank=hvd.rank())
    test_sampler = DistributedSampler(test_set, num_replicas=hvd.size(), rank=hvd.rank(), shuffle=False)
    train_loader = DataLoader(train_set, batch_size=args.batch_size, sampler=train_sampler)
    test_loader = DataLoader(test_set, batch_size=128, sampler=test_sampler)

    model = Classifier()
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr * hvd.size(), momentum=args.momentum)
    # Every worker starts from rank 0's weights and optimizer state.
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    hvd.broadcast_optimizer_state(optimizer, root_rank=0)
    optimizer = hvd.DistributedOptimizer(
        optimizer,
        named_parameters=model.named_parameters(),
        compression=hvd.Compression.fp16 if args.fp16_allreduce else hvd.Compression.none,
        op=hvd.Average,
        gradient_predivide_factor=args.predivide,
    )

    for epoch in range(1, args.epochs + 1):
        model.train()
        train_sampler.set_epoch(epoch)
        for images, labels in train_loader:
            optimizer.zero_grad()
            loss = F.nll_loss(model(images), labels)
            loss.backward()
            optimizer.step()

        model.eval()
        total_loss, correct = 0.0, 0.0
        with torch.no_grad():
            for images, labels in test_loader:
                out = model(images)
                total_loss += F.nll_loss(out, labels, reduction="sum").item()
                correct += (out.argmax(dim=1) == labels).sum().item()
        test_loss = averaged(total_loss / len(test_sampler), "test_loss")
        accuracy = averaged(correct / len(test_sampler), "test_accuracy")
        if hvd.rank() == 0:
            print("epoch %d: train loss %.4f, test loss %.4f, accuracy %.2f%%"
                  % (epoch, loss.item(), test_loss, 100 * accuracy), flush=True)
    if hvd.rank() == 0:
        print("final loss %.6f accuracy %.4f" % (test_loss, accuracy))


if __name__ == "__main__":
    main()
