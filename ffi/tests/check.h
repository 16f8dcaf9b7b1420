/* Checks for the C test programs: a failed check prints where and why and
 * ends the job (the launcher reports the rank's exit status). */
#ifndef HMPI_TEST_CHECK_H
#define HMPI_TEST_CHECK_H

#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

static int check_rank = -1;

#define CHECK(cond)                                                           \
    do {                                                                      \
        if (!(cond)) {                                                        \
            fprintf(stderr, "rank %d: %s:%d: check failed: %s\n", check_rank, \
                    __FILE__, __LINE__, #cond);                               \
            fflush(stderr);                                                   \
            exit(3);                                                          \
        }                                                                     \
    } while (0)

/* An MPI call that must succeed. */
#define OK(call) CHECK((call) == MPI_SUCCESS)

/* An MPI call that must fail with error class `cls` (under
 * MPI_ERRORS_RETURN). */
#define FAILS(cls, call)                                                      \
    do {                                                                      \
        int rc_ = (call);                                                     \
        int class_ = -1;                                                      \
        MPI_Error_class(rc_, &class_);                                        \
        if (class_ != (cls)) {                                                \
            fprintf(stderr, "rank %d: %s:%d: %s returned class %d, not %s\n", \
                    check_rank, __FILE__, __LINE__, #call, class_, #cls);     \
            fflush(stderr);                                                   \
            exit(3);                                                          \
        }                                                                     \
    } while (0)

/* The line every rank prints when its checks passed. */
#define PASSED(name)                                                          \
    do {                                                                      \
        printf("rank %d: %s passed\n", check_rank, name);                     \
        fflush(stdout);                                                       \
    } while (0)

#endif
