/* MPI_THREAD_MULTIPLE: four threads per rank, each ping-ponging with its
 * peer thread on its own communicator, plus four more on one shared
 * communicator with distinct tags; every value checked. */
#include "check.h"
#include <pthread.h>

enum { THREADS = 4, ROUNDS = 300 };

struct job {
    MPI_Comm comm;
    int tag;
    int failed;
};

static void *pingpong(void *arg) {
    struct job *j = arg;
    int peer = 1 - check_rank;
    for (int i = 0; i < ROUNDS; i++) {
        long v = (long)j->tag * 100000 + i, got = -1;
        if (check_rank == 0) {
            if (MPI_Send(&v, 1, MPI_LONG, peer, j->tag, j->comm) != MPI_SUCCESS) j->failed = 1;
            if (MPI_Recv(&got, 1, MPI_LONG, peer, j->tag, j->comm, MPI_STATUS_IGNORE) != MPI_SUCCESS) j->failed = 1;
            if (got != v + 1) j->failed = 1;
        } else {
            MPI_Request r;
            if (MPI_Irecv(&got, 1, MPI_LONG, peer, j->tag, j->comm, &r) != MPI_SUCCESS) j->failed = 1;
            if (MPI_Wait(&r, MPI_STATUS_IGNORE) != MPI_SUCCESS) j->failed = 1;
            if (got != v) j->failed = 1;
            got++;
            if (MPI_Send(&got, 1, MPI_LONG, peer, j->tag, j->comm) != MPI_SUCCESS) j->failed = 1;
        }
        /* Each thread also allocates: the shared heap's thread caches. */
        char *p = malloc((size_t)(i % 97) * 37 + 1);
        int sh = 0;
        HMPI_Is_shared(p, &sh);
        if (!p || !sh) j->failed = 1;
        free(p);
    }
    return NULL;
}

int main(int argc, char **argv) {
    int provided, size;
    OK(MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided));
    CHECK(provided == MPI_THREAD_MULTIPLE);
    OK(MPI_Comm_rank(MPI_COMM_WORLD, &check_rank));
    OK(MPI_Comm_size(MPI_COMM_WORLD, &size));
    CHECK(size == 2);
    struct job jobs[2 * THREADS];
    pthread_t th[2 * THREADS];
    MPI_Comm shared;
    OK(MPI_Comm_dup(MPI_COMM_WORLD, &shared));
    for (int i = 0; i < THREADS; i++) {
        OK(MPI_Comm_dup(MPI_COMM_WORLD, &jobs[i].comm));
        jobs[i].tag = i;
        jobs[THREADS + i].comm = shared;
        jobs[THREADS + i].tag = 10 + i;
    }
    for (int i = 0; i < 2 * THREADS; i++) {
        jobs[i].failed = 0;
        CHECK(pthread_create(&th[i], NULL, pingpong, &jobs[i]) == 0);
    }
    for (int i = 0; i < 2 * THREADS; i++) {
        CHECK(pthread_join(th[i], NULL) == 0);
        CHECK(!jobs[i].failed);
    }
    for (int i = 0; i < THREADS; i++) OK(MPI_Comm_free(&jobs[i].comm));
    OK(MPI_Comm_free(&shared));
    OK(MPI_Finalize());
    PASSED("threads");
    return 0;
}
