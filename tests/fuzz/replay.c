/* SPDX-License-Identifier: Apache-2.0 */
/*
 * replay - runs a fuzz harness over files, without libFuzzer: the regression test that
 * every build (plain, ASan+UBSan, TSan, any compiler) runs over the committed corpus.
 *
 *   fuzz_NAME_replay DIR|FILE...
 *
 * Each input is read into a buffer of exactly its size, so that a read past its end is
 * caught by AddressSanitizer as it would be under libFuzzer. Exits 0 after every input
 * ran; 1 when an argument could not be read or named no input at all (an empty corpus
 * would make a test that cannot fail). A failing property aborts the process.
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fuzz.h"

static int run_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    struct stat st;
    uint8_t *data;

    if (f == NULL || fstat(fileno(f), &st) < 0) {
        fprintf(stderr, "replay: cannot read %s\n", path);
        if (f != NULL)
            fclose(f);
        return -1;
    }
    data = malloc(st.st_size > 0 ? (size_t)st.st_size : 1);
    if (data == NULL || fread(data, 1, (size_t)st.st_size, f) != (size_t)st.st_size) {
        fprintf(stderr, "replay: cannot read %s\n", path);
        free(data);
        fclose(f);
        return -1;
    }
    fclose(f);
    LLVMFuzzerTestOneInput(data, (size_t)st.st_size);
    free(data);
    return 0;
}

static int by_name(const struct dirent **a, const struct dirent **b)
{
    return strcmp((*a)->d_name, (*b)->d_name);
}

int main(int argc, char **argv)
{
    int inputs = 0;

    for (int i = 1; i < argc; i++) {
        struct stat st;
        struct dirent **names;
        int n;

        if (stat(argv[i], &st) < 0) {
            fprintf(stderr, "replay: cannot read %s\n", argv[i]);
            return 1;
        }
        if (!S_ISDIR(st.st_mode)) {
            if (run_file(argv[i]) < 0)
                return 1;
            inputs++;
            continue;
        }
        if ((n = scandir(argv[i], &names, NULL, by_name)) < 0) {
            fprintf(stderr, "replay: cannot list %s\n", argv[i]);
            return 1;
        }
        for (int k = 0; k < n; k++) {
            char path[4096];
            snprintf(path, sizeof(path), "%s/%s", argv[i], names[k]->d_name);
            if (names[k]->d_name[0] != '.' && stat(path, &st) == 0 && S_ISREG(st.st_mode)) {
                if (run_file(path) < 0)
                    return 1;
                inputs++;
            }
            free(names[k]);
        }
        free(names);
    }
    if (inputs == 0) {
        fprintf(stderr, "replay: no inputs given\n");
        return 1;
    }
    printf("replayed %d inputs\n", inputs);
    return 0;
}
