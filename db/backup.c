/* SPDX-License-Identifier: Apache-2.0 */
/*
 * backup.c - the database's check at start.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "store_impl.h"

/*
 * quick_check rather than integrity_check: it reads every page and b-tree but does not
 * match each index against its table. On a database of 100,000 jobs (128 MiB) it takes
 * 0.5 s against integrity_check's 2.4 s (medians of 5, page cache warm): a delay paid at
 * every start, for damage (an index out of step with its table, with sound pages) that
 * a torn write or a bad disk hardly ever makes without also breaking a page.
 */
int store_check(const char *path, struct error *err)
{
    sqlite3 *db = NULL;
    sqlite3_stmt *s = NULL;
    char found[sizeof(err->text)] = "";
    size_t used = 0;
    int rc, sound = 0;

    if (access(path, F_OK) < 0 && errno == ENOENT)
        return 0; /* the first start: nothing to check */
    /* Read-write, so that it can read a WAL (whose index needs writing), but no CREATE. */
    rc = sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX, NULL);
    if (rc == SQLITE_OK) {
        sqlite3_busy_timeout(db, 5000);
        /* At most 4 problems: the first few say enough to act on, and fit in err. */
        rc = sqlite3_prepare_v2(db, "PRAGMA quick_check(4)", -1, &s, NULL);
    }
    while (rc == SQLITE_OK && (rc = sqlite3_step(s)) == SQLITE_ROW) {
        const char *row = store__col(s, 0);
        rc = SQLITE_OK;
        if (strcmp(row, "ok") == 0) {
            sound = 1;
            continue;
        }
        /* One line per problem, without the banner that the first one carries. */
        if (strncmp(row, "*** in database main ***\n", 25) == 0)
            row += 25;
        if (used < sizeof(found))
            used +=
                (size_t)snprintf(found + used, sizeof(found) - used, "%s%s", used ? "; " : "", row);
    }
    for (char *nl = found; (nl = strchr(nl, '\n')) != NULL;)
        *nl = ' ';
    if (rc == SQLITE_DONE)
        rc = SQLITE_OK;
    if (rc != SQLITE_OK) {
        /* A file that SQLite cannot even read as a database is corrupt too. */
        store__fail(NULL, rc, err, "quick_check"); /* for errno */
        errprintf(err, "%s", db != NULL ? sqlite3_errmsg(db) : sqlite3_errstr(rc));
    } else if (!sound) {
        errno = EUCLEAN;
        errprintf(err, "%s", found[0] ? found : "quick_check found problems");
    }
    sqlite3_finalize(s);
    sqlite3_close(db);
    return rc == SQLITE_OK && sound ? 0 : -1;
}
