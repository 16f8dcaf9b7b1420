/* The MPI peer of `hmpi-bench msgrate-mt`: N threads per rank in 2 ranks at
 * MPI_THREAD_MULTIPLE, each pair on a communicator of its own (the mapping
 * an MPI with several VCIs spreads best), running OSU's message-rate loop:
 * 64 nonblocking 8-byte sends, 64 receives, a one-byte acknowledgement.
 * Usage: msgrate_mt N ITERS REPS. Rank 0 prints, per repetition and thread,
 * "msgrate-mt-sample REP MESSAGES SECONDS" (the lines hmpi's workers print).
 * Build with any MPI's mpicc (and hmpicc): cc -O2 -pthread. */
#include <mpi.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

enum { WINDOW = 64, SIZE = 8, MAX_THREADS = 64 };

static int rank, iters;

struct pair {
    MPI_Comm comm;
    double secs;
};

static void one(MPI_Comm c, char *bufs, MPI_Request *reqs) {
    int peer = 1 - rank;
    char ack = 0;
    if (rank == 0) {
        for (int i = 0; i < WINDOW; i++)
            MPI_Isend(bufs, SIZE, MPI_BYTE, peer, 0, c, &reqs[i]);
        MPI_Waitall(WINDOW, reqs, MPI_STATUSES_IGNORE);
        MPI_Recv(&ack, 1, MPI_BYTE, peer, 0, c, MPI_STATUS_IGNORE);
    } else {
        for (int i = 0; i < WINDOW; i++)
            MPI_Irecv(bufs + i * SIZE, SIZE, MPI_BYTE, peer, 0, c, &reqs[i]);
        MPI_Waitall(WINDOW, reqs, MPI_STATUSES_IGNORE);
        MPI_Send(&ack, 1, MPI_BYTE, peer, 0, c);
    }
}

static void *run(void *arg) {
    struct pair *p = arg;
    char *bufs = calloc(WINDOW, SIZE);
    MPI_Request reqs[WINDOW];
    for (int i = 0; i < iters / 10 + 1; i++) one(p->comm, bufs, reqs);
    double t = MPI_Wtime();
    for (int i = 0; i < iters; i++) one(p->comm, bufs, reqs);
    p->secs = MPI_Wtime() - t;
    free(bufs);
    return NULL;
}

int main(int argc, char **argv) {
    int provided, size;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int n = argc > 3 ? atoi(argv[1]) : 0, reps = argc > 3 ? atoi(argv[3]) : 0;
    iters = argc > 3 ? atoi(argv[2]) : 0;
    if (provided != MPI_THREAD_MULTIPLE || size != 2 || n < 1 || n > MAX_THREADS || iters < 1 ||
        reps < 1) {
        if (rank == 0) fprintf(stderr, "usage: msgrate_mt N ITERS REPS (2 ranks, THREAD_MULTIPLE)\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    struct pair pairs[MAX_THREADS];
    pthread_t th[MAX_THREADS];
    for (int t = 0; t < n; t++) MPI_Comm_dup(MPI_COMM_WORLD, &pairs[t].comm);
    for (int r = 0; r < reps; r++) {
        MPI_Barrier(MPI_COMM_WORLD);
        for (int t = 1; t < n; t++) pthread_create(&th[t], NULL, run, &pairs[t]);
        run(&pairs[0]);
        for (int t = 1; t < n; t++) pthread_join(th[t], NULL);
        if (rank == 0)
            for (int t = 0; t < n; t++)
                printf("msgrate-mt-sample %d %d %.9f\n", r, iters * WINDOW, pairs[t].secs);
        fflush(stdout);
    }
    for (int t = 0; t < n; t++) MPI_Comm_free(&pairs[t].comm);
    MPI_Finalize();
    return 0;
}
