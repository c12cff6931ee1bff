/* SPDX-License-Identifier: Apache-2.0 */
/* journal_store.h - ringd's journal over its SQLite store (journal.h). */
#ifndef RINGD_JOURNAL_STORE_H
#define RINGD_JOURNAL_STORE_H

#include "db/store.h"
#include "journal.h"
#include "scheduler/model/cluster.h"

/* The journal's context: the scheduler thread's store connection and the cluster that
 * placements refer to (both borrowed). */
struct journal_store {
    struct store *st;
    const struct cluster *cluster;
    const char *id_label; /* the backend's (backend_ops.id_label) */
};

extern const struct journal_ops journal_store_ops;

#endif /* RINGD_JOURNAL_STORE_H */
