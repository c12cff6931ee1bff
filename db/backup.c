/* SPDX-License-Identifier: Apache-2.0 */
/*
 * backup.c - an online copy of the database, and its check at start.
 *
 * A copy of ringd.db made with cp while ringd runs is no backup: commits since the last
 * checkpoint live only in ringd.db-wal (ringd checkpoints in the background, never on
 * commit: wal_autocheckpoint=0), and a cp racing a checkpoint copies pages from two
 * different moments. SQLite's backup API reads the database, WAL included, under one read
 * snapshot as any reader does: commits carry on meanwhile, and the copy is the database as
 * of one commit.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "store_impl.h"

/* Copies st's database into the empty file at path. */
static int copy_into(struct store *st, const char *path, struct error *err)
{
    sqlite3 *dst = NULL;
    sqlite3_backup *b;
    int rc;

    rc = sqlite3_open_v2(path, &dst, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX, NULL);
    /* No journal and no fsync: a copy that fails half-way is thrown away, never repaired. */
    if (rc == SQLITE_OK)
        rc = sqlite3_exec(dst, "PRAGMA journal_mode=OFF; PRAGMA synchronous=OFF", NULL, NULL, NULL);
    if (rc != SQLITE_OK) {
        errprintf(err, "backup: cannot open %s: %s", path,
                  dst ? sqlite3_errmsg(dst) : sqlite3_errstr(rc));
        sqlite3_close(dst);
        return errno = EIO, -1;
    }
    b = sqlite3_backup_init(dst, "main", st->db, "main");
    if (b == NULL) {
        errprintf(err, "backup: %s", sqlite3_errmsg(dst));
        sqlite3_close(dst);
        return errno = EIO, -1;
    }
    /*
     * Every page in one step: one read snapshot for the whole copy. In smaller steps a
     * commit by another connection between two of them restarts the copy, which under a
     * steady stream of submissions might never finish.
     */
    rc = sqlite3_backup_step(b, -1);
    sqlite3_backup_finish(b);
    if (rc != SQLITE_DONE) {
        store__fail(NULL, rc, err, "backup");
        sqlite3_close(dst);
        return -1;
    }
    /* The copy says WAL, as its source does; a backup is one self-contained file, which
     * opens read-only anywhere, so it goes back to a rollback journal (ringd puts it in WAL
     * again when it runs on it). */
    rc = sqlite3_exec(dst, "PRAGMA journal_mode=DELETE", NULL, NULL, NULL);
    if (rc != SQLITE_OK) {
        store__fail(NULL, rc, err, "backup");
        sqlite3_close(dst);
        return -1;
    }
    if (sqlite3_close(dst) != SQLITE_OK)
        return errno = EIO, errprintf(err, "backup: cannot close %s", path);
    return 0;
}

int store_backup(struct store *st, const char *dir, int *fd, int64_t *size, struct error *err)
{
    char path[PATH_MAX];
    struct stat sb;
    int tfd;

    if (snprintf(path, sizeof(path), "%s/backup-XXXXXX", dir) >= (int)sizeof(path))
        return errno = ENAMETOOLONG,
               errprintf(err, "backup: the data directory's path is too long");
    /* mkostemp makes it 0600: the copy holds every token's hash, like the database. */
    if ((tfd = mkostemp(path, O_CLOEXEC)) < 0)
        return errprintf(err, "backup: cannot create a file in %s: %s", dir, strerror(errno));
    if (copy_into(st, path, err) < 0) {
        int saved = errno;
        unlink(path);
        close(tfd);
        errno = saved;
        return -1;
    }
    /* Nameless from here: the caller's descriptor is all that is left of it. */
    unlink(path);
    if (fstat(tfd, &sb) < 0 || lseek(tfd, 0, SEEK_SET) < 0) {
        int saved = errno;
        close(tfd);
        errno = saved;
        return errprintf(err, "backup: %s", strerror(errno));
    }
    *fd = tfd;
    *size = (int64_t)sb.st_size;
    return 0;
}

void store_backup_sweep(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    if (d == NULL)
        return;
    /* store_backup's names: "backup-" and mkostemp's 6 characters */
    while ((e = readdir(d)) != NULL) {
        if (strncmp(e->d_name, "backup-", 7) == 0 && strlen(e->d_name) == 13)
            unlinkat(dirfd(d), e->d_name, 0);
    }
    closedir(d);
}

/*
 * quick_check rather than integrity_check: it reads every page and b-tree but does not
 * match each index against its table. On a database of 100,000 jobs (128 MiB) it takes
 * 0.45 s against integrity_check's 1.97 s (medians of 10 interleaved runs, page cache
 * warm): a delay paid at every start, for damage (an index out of step with its table,
 * with sound pages) that a torn write or a bad disk hardly ever makes without also breaking
 * a page.
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
