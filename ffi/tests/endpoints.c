/* Thread endpoints in C (MPIX_Comm_create_endpoints): the two ranks ask
 * for different numbers of endpoints, one thread per endpoint; each
 * endpoint handle is an ordinary MPI_Comm: its rank, a ring of
 * nonblocking sends, ANY_SOURCE/ANY_TAG receives (after a probe) that
 * keep each sender's order, and collectives over every endpoint; each
 * handle is freed with MPI_Comm_free. Bad counts and too few VCIs are
 * errors on every rank. Run with HMPI_VCIS=4 (2 + 3 endpoints) and
 * HMPI_VCIS=1 (one endpoint per rank, on VCI 0). */
#include "check.h"
#include <pthread.h>

enum { MAX_EP = 3, PER_SENDER = 4 };

struct job {
    MPI_Comm comm;
    int want_rank, want_size;
    int failed;
};

#define T(cond)                                                               \
    do {                                                                      \
        if (!(cond)) {                                                        \
            fprintf(stderr, "rank %d: %s:%d: %s\n", check_rank, __FILE__,     \
                    __LINE__, #cond);                                         \
            j->failed = 1;                                                    \
            return NULL;                                                      \
        }                                                                     \
    } while (0)

static void *endpoint(void *arg) {
    struct job *j = arg;
    MPI_Comm c = j->comm;
    int me, size;
    T(MPI_Comm_rank(c, &me) == MPI_SUCCESS && me == j->want_rank);
    T(MPI_Comm_size(c, &size) == MPI_SUCCESS && size == j->want_size);
    /* Ring: nonblocking send to the next endpoint, receive from the
     * previous one. */
    int next = (me + 1) % size, prev = (me + size - 1) % size;
    int out = 1000 + me, in = -1;
    MPI_Request r;
    MPI_Status st;
    T(MPI_Isend(&out, 1, MPI_INT, next, 3, c, &r) == MPI_SUCCESS);
    T(MPI_Recv(&in, 1, MPI_INT, prev, 3, c, &st) == MPI_SUCCESS);
    T(MPI_Wait(&r, MPI_STATUS_IGNORE) == MPI_SUCCESS);
    T(in == 1000 + prev && st.MPI_SOURCE == prev && st.MPI_TAG == 3);
    /* Wildcards: every other endpoint sends numbered messages to
     * endpoint 0 with tags 10 + its rank; endpoint 0 probes ANY_SOURCE
     * and ANY_TAG, receives what the probe found, and checks the order
     * of each sender. */
    if (me == 0) {
        int next_of[2 * MAX_EP] = {0};
        for (int k = 0; k < (size - 1) * PER_SENDER; k++) {
            MPI_Status ps;
            int msg[2];
            T(MPI_Probe(MPI_ANY_SOURCE, MPI_ANY_TAG, c, &ps) == MPI_SUCCESS);
            int s = ps.MPI_SOURCE;
            T(s > 0 && s < size && ps.MPI_TAG == 10 + s);
            T(MPI_Recv(msg, 2, MPI_INT, MPI_ANY_SOURCE, ps.MPI_TAG, c, &st) == MPI_SUCCESS);
            T(st.MPI_SOURCE == s && msg[0] == s && msg[1] == next_of[s]);
            next_of[s]++;
        }
        int flag = 1;
        T(MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, c, &flag, MPI_STATUS_IGNORE) == MPI_SUCCESS);
        T(!flag);
    } else {
        for (int i = 0; i < PER_SENDER; i++) {
            int msg[2] = {me, i};
            T(MPI_Send(msg, 2, MPI_INT, 0, 10 + me, c) == MPI_SUCCESS);
        }
    }
    /* Collectives over every endpoint. */
    T(MPI_Barrier(c) == MPI_SUCCESS);
    long sum = 0, mine = me + 1;
    T(MPI_Allreduce(&mine, &sum, 1, MPI_LONG, MPI_SUM, c) == MPI_SUCCESS);
    T(sum == (long)size * (size + 1) / 2);
    int b[2] = {0, 0};
    if (me == size - 1) b[0] = 7, b[1] = 8;
    T(MPI_Bcast(b, 2, MPI_INT, size - 1, c) == MPI_SUCCESS);
    T(b[0] == 7 && b[1] == 8);
    int all[2 * MAX_EP];
    T(MPI_Allgather(&me, 1, MPI_INT, all, 1, MPI_INT, c) == MPI_SUCCESS);
    for (int i = 0; i < size; i++) T(all[i] == i);
    int g[2 * MAX_EP], ten = 10 * me;
    T(MPI_Gather(&ten, 1, MPI_INT, g, 1, MPI_INT, 0, c) == MPI_SUCCESS);
    if (me == 0)
        for (int i = 0; i < size; i++) T(g[i] == 10 * i);
    int mx = -1;
    T(MPI_Reduce(&me, &mx, 1, MPI_INT, MPI_MAX, 0, c) == MPI_SUCCESS);
    T(me != 0 || mx == size - 1);
    T(MPI_Comm_free(&j->comm) == MPI_SUCCESS && j->comm == MPI_COMM_NULL);
    return NULL;
}

int main(int argc, char **argv) {
    int provided, size;
    OK(MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided));
    CHECK(provided == MPI_THREAD_MULTIPLE);
    OK(MPI_Comm_rank(MPI_COMM_WORLD, &check_rank));
    OK(MPI_Comm_size(MPI_COMM_WORLD, &size));
    CHECK(size == 2);
    OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    const char *vcis_var = getenv("HMPI_VCIS");
    int vcis = vcis_var ? atoi(vcis_var) : 1;

    /* Rank 0 two endpoints, rank 1 three (one each with one VCI). */
    int counts[2] = {2, 3};
    if (vcis < 4) counts[0] = counts[1] = 1;
    int n = counts[check_rank], total = counts[0] + counts[1];
    MPI_Comm ep[MAX_EP];
    OK(MPIX_Comm_create_endpoints(MPI_COMM_WORLD, n, MPI_INFO_NULL, ep));
    struct job jobs[MAX_EP];
    pthread_t th[MAX_EP];
    for (int i = 0; i < n; i++) {
        jobs[i] = (struct job){ep[i], (check_rank ? counts[0] : 0) + i, total, 0};
        CHECK(pthread_create(&th[i], NULL, endpoint, &jobs[i]) == 0);
    }
    for (int i = 0; i < n; i++) {
        CHECK(pthread_join(th[i], NULL) == 0);
        CHECK(!jobs[i].failed);
    }

    /* A bad count here is MPI_ERR_ARG, and the other rank (whose count is
     * fine) learns of it: MPI_ERR_COMM. */
    MPI_Comm none[MAX_EP];
    if (check_rank == 0) {
        FAILS(MPI_ERR_ARG, MPIX_Comm_create_endpoints(MPI_COMM_WORLD, -1, MPI_INFO_NULL, none));
    } else {
        FAILS(MPI_ERR_COMM, MPIX_Comm_create_endpoints(MPI_COMM_WORLD, 1, MPI_INFO_NULL, none));
    }
    FAILS(MPI_ERR_ARG, MPIX_Comm_create_endpoints(MPI_COMM_WORLD, 1, MPI_INFO_NULL, NULL));
    if (vcis == 1) {
        /* Two endpoints need two VCIs. */
        FAILS(MPI_ERR_COMM, MPIX_Comm_create_endpoints(MPI_COMM_WORLD, 2, MPI_INFO_NULL, none));
    }
    OK(MPI_Barrier(MPI_COMM_WORLD));
    PASSED("endpoints");
    OK(MPI_Finalize());
    return 0;
}
