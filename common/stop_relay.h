/* SPDX-License-Identifier: Apache-2.0 */
/*
 * stop_relay.h - how a stop reaches a rank that runs under srun or mpirun, for the launchers
 * on both sides of the tree: ringd's batch scripts and mpirun command lines (scheduler/)
 * and ringrun inside an allocation (worker/ringrun/).
 *
 * The stop contract is SIGTERM to every rank (libring agrees on it, the program checkpoints
 * and exits 75). Neither launcher delivers a SIGTERM intact: slurmstepd takes a SIGTERM to a
 * step for a cancel and tells srun, which then exits 143 at once instead of waiting for the
 * ranks' 75; mpirun answers its own SIGTERM by killing the job. Both only pass SIGUSR2 on.
 * So the launchers send RANK_STOP_SIGNAL, and a small sh wrapper around each rank turns it
 * into the program's SIGTERM. The wrappers are fixed shell text: the program and its
 * arguments reach them as "$@", so no user text is read by a shell. No single quote inside:
 * batch scripts embed them in one.
 */
#ifndef RING_STOP_RELAY_H
#define RING_STOP_RELAY_H

#include <signal.h>

/* What a launcher sends to the ranks' wrappers to ask for a stop. */
#define RANK_STOP_SIGNAL SIGUSR2

/*
 * The end of a rank wrapper that has just started the program in the background with
 * SIGUSR2 ignored: it passes SIGUSR2 and SIGTERM on to the program as SIGTERM and exits
 * with its status. A wait interrupted by a trapped signal returns early (128 + the signal),
 * so it waits again while the program lives. The program may also end just as the signal
 * comes (the ranks agree on a stop, so a rank can exit before its own signal arrives): then
 * the shell may have collected it while running the trap, and only a second wait gives its
 * status; a second wait for a program already reported answers 127, and the first status
 * stands. (A program that itself exits 127 at that instant is reported as the signal.)
 */
#define RANK_STOP_RELAY                                                                            \
    "p=$!; trap \"kill -TERM $p 2>/dev/null\" TERM USR2; "                                         \
    "while :; do wait $p; s=$?; kill -0 $p 2>/dev/null && continue; "                              \
    "if [ $s -gt 128 ]; then wait $p; r=$?; [ $r = 127 ] || s=$r; fi; exit $s; done"

/*
 * The wrapper around each rank of an srun step: sh -c RANK_STOP_WRAPPER rank PROGRAM ARGS.
 * slurmstepd signals every process of the step, the program included, so the program
 * starts with SIGUSR2 ignored (an ignored signal stays ignored across exec) and only sees
 * the SIGTERM. A cancel or time limit from Slurm reaches it as SIGTERM as before.
 */
#define RANK_STOP_WRAPPER "trap \"\" USR2; \"$@\" & " RANK_STOP_RELAY

#endif /* RING_STOP_RELAY_H */
