/* SPDX-License-Identifier: Apache-2.0 */
/*
 * checkpoint.c - WAL checkpoints off the commit path.
 *
 * By default SQLite checkpoints inside whichever COMMIT pushes the WAL past 1000 pages:
 * that commit then copies the WAL into the database and fsyncs it, and the requests
 * waiting on it see a latency spike many times the usual commit. ringd's connections turn
 * that off and this thread checkpoints instead, every CHECKPOINT_MS, in PASSIVE mode (it
 * never blocks readers or writers; what it cannot copy now it copies next time).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/ticker.h"
#include "store_impl.h"

#define CHECKPOINT_MS 250

struct store_checkpointer {
    struct ticker *ticker;
    struct store *st; /* a connection of its own: the ticker's, then stop's */
};

static void checkpoint(void *arg)
{
    struct store_checkpointer *c = arg;
    sqlite3_wal_checkpoint_v2(c->st->db, NULL, SQLITE_CHECKPOINT_PASSIVE, NULL, NULL);
}

struct store_checkpointer *store_checkpointer_start(const char *path, struct error *err)
{
    struct store_checkpointer *c = calloc(1, sizeof(*c));
    if (c == NULL)
        return errno = ENOMEM, errprintf(err, "out of memory"), NULL;
    store__background_checkpoints = 1;
    if (store_open(path, &c->st, err) < 0) {
        free(c);
        return NULL;
    }
    if ((c->ticker = ticker_start(CHECKPOINT_MS, checkpoint, c)) == NULL) {
        errprintf(err, "cannot start the checkpoint thread: %s", strerror(errno));
        store_close(c->st);
        free(c);
        return NULL;
    }
    return c;
}

void store_checkpointer_stop(struct store_checkpointer *c)
{
    if (c == NULL)
        return;
    ticker_stop(c->ticker);
    /* The last one on the way out: the WAL is copied and emptied when nobody else reads. */
    sqlite3_wal_checkpoint_v2(c->st->db, NULL, SQLITE_CHECKPOINT_TRUNCATE, NULL, NULL);
    store_close(c->st);
    free(c);
}
