/* SPDX-License-Identifier: Apache-2.0 */
/* Prints the wrapper ringd puts around each rank of an mpirun job (scheduler/mpirun.h), so
 * that pmix_bootstrap.sh tests the very text ringd runs. */
#include <stdio.h>

#include "scheduler/backend/mpirun.h"

int main(void)
{
    return fputs(MPIRUN_WRAPPER, stdout) < 0;
}
