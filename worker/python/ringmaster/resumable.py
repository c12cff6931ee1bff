# SPDX-License-Identifier: Apache-2.0
"""The stop/resume contract of docs/design.md ("The worker contract"), for Python programs.

ringd resizes and preempts a job by sending SIGTERM to its ranks; libring agrees on the
stop, so that stop_requested() turns true on every rank after the same collective. At a
step boundary, stop_point() then has rank 0 save a checkpoint atomically into
RING_CHECKPOINT_DIR, and every rank shut down and exit 75 (EX_TEMPFAIL: stopped,
resumable). The next attempt, maybe on another number of ranks, calls restore() and goes
on. What goes into a checkpoint must not depend on the world size: keep the parameters,
the optimizer's state and how far the data was consumed (in samples, not steps).

progress() has rank 0 write RING_RUN_DIR/progress.json in the C trainer's format, which
ringd shows in the API and feeds to its speed model.

    job = ringmaster.Resumable()
    state = job.restore() or {"epoch": 0, ...}
    for step in ...:
        train_one_step()
        job.stop_point(lambda: {"epoch": epoch, "model": ...})   # exits 75 on a stop
    job.save(final_state)
"""
import math
import os
import pickle
import sys

from . import basics, objects

__all__ = ["Resumable", "EXIT_STOPPED"]

EXIT_STOPPED = 75


class Resumable:
    """directory: where checkpoints go (default $RING_CHECKPOINT_DIR; None: no checkpoints,
    a stop still exits 75). filename: the checkpoint's name in it. dump(obj, file) and
    load(file) serialize (default pickle; ringmaster.torch's uses torch.save/torch.load)."""

    def __init__(self, directory=None, filename="checkpoint.pkl", dump=None, load=None):
        if directory is None:
            directory = os.environ.get("RING_CHECKPOINT_DIR") or None
        self.directory = directory
        self.filename = filename
        self._dump = dump or (lambda obj, f: pickle.dump(obj, f, protocol=pickle.HIGHEST_PROTOCOL))
        self._load = load or pickle.load
        self.restored = False
        self._points = 0

    @property
    def path(self):
        return os.path.join(self.directory, self.filename) if self.directory else None

    def restore(self):
        """The state saved last, on every rank (rank 0 reads it and broadcasts it), or None
        when there is none. A collective: every rank calls it."""
        state, err = None, None
        if basics.rank() == 0 and self.path is not None and os.path.exists(self.path):
            try:
                with open(self.path, "rb") as f:
                    state = self._load(f)
            except Exception as e:  # every rank must learn it, not just rank 0
                err = "cannot read checkpoint %s: %s" % (self.path, e)
        if basics.size() > 1:
            state, err = objects.broadcast_object((state, err), 0, name="ringmaster.restore")
        if err is not None:
            raise RuntimeError("ringmaster: " + err)
        self.restored = state is not None
        return state

    def save(self, state):
        """Rank 0 writes state atomically (temporary file, fsync, rename, fsync of the
        directory); other ranks do nothing. Not a collective."""
        if basics.rank() != 0 or self.directory is None:
            return
        os.makedirs(self.directory, exist_ok=True)
        tmp = self.path + ".tmp"
        with open(tmp, "wb") as f:
            self._dump(state, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.path)
        fd = os.open(self.directory, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def stop_point(self, state):
        """Call at a step boundary, on every rank, after the step's collectives. When a stop
        was agreed on: rank 0 saves state (or state(), when callable, so that nothing is
        built on steps that go on), every rank shuts down and the process exits 75.
        Returns False otherwise."""
        self._points += 1
        if not basics.stop_requested():
            return False
        sys.stderr.write("ringmaster: rank %d: stop agreed at stop point %d; exiting %d\n"
                         % (basics.rank(), self._points, EXIT_STOPPED))
        if basics.rank() == 0:
            self.save(state() if callable(state) else state)
            if self.directory is not None:
                print("stop requested: checkpointed to %s; exiting %d" % (self.path, EXIT_STOPPED), flush=True)
        sys.stdout.flush()
        basics.shutdown()
        sys.exit(EXIT_STOPPED)

    @staticmethod
    def progress(epoch, epochs, step, total_steps, loss, samples_per_s):
        """Rank 0 writes $RING_RUN_DIR/progress.json (atomically; nothing without
        RING_RUN_DIR), in the format of the C trainer (worker/examples/train.c)."""
        run_dir = os.environ.get("RING_RUN_DIR")
        if basics.rank() != 0 or not run_dir:
            return
        doc = (
            '{"epoch":%d,"epochs":%d,"step":%d,"total_steps":%d,"loss":%s,"samples_per_s":%.1f,'
            '"world_size":%d}\n'
            % (epoch, epochs, step, total_steps, "%.6f" % loss if math.isfinite(loss) else "null",
               float(samples_per_s), basics.size())
        )
        path = os.path.join(run_dir, "progress.json")
        try:
            with open(path + ".tmp", "w") as f:
                f.write(doc)
            os.replace(path + ".tmp", path)
        except OSError:
            pass  # progress is advisory, as in the C trainer
