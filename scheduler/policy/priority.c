/* SPDX-License-Identifier: Apache-2.0 */
/*
 * policy_priority.c - fifo by priority, where a higher-priority job that does not fit
 * preempts lower-priority running jobs: they get SIGTERM, checkpoint, exit 75 and wait in
 * the queue to resume from their checkpoints (policy_fifo.c has the pass).
 *
 * Victims are the lowest-priority running jobs, and among equals the most recently started
 * (they lose the least work); jobs are stopped only when that makes the newcomer fit.
 *
 * Starvation: a preempted or waiting job gains one priority level per aging_s it waits
 * (policy_params), and keeps the levels it gained while it runs; so after
 * (p_max - p + 1) x aging_s it outranks every running job and preempts its way in: its
 * wait is bounded. It cannot thrash: a job it displaces ranks lower until that job in turn
 * has waited aging_s per level of difference.
 */
#include "policy_impl.h"

static int plan(const struct policy_snapshot *s, struct policy_target *out)
{
    int preempt = 1;
    return policy_run(s, out, policy__fifo_decide, &preempt);
}

const struct policy_ops policy_priority = {"priority", 0, plan, NULL};
