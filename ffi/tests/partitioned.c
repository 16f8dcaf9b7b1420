/* Partitioned communication: a ring of partitioned sends (8 partitions,
 * marked ready by 4 threads in a different order every round) and
 * receives (4 partitions, polled with MPI_Parrived), restarted ROUNDS
 * times with the receive waited for first; a derived (non-contiguous)
 * datatype on the send side into a private stack buffer; MPI_Pready_range
 * and MPI_Pready_list; statuses and MPI_Request_get_status; PROC_NULL; the
 * argument errors; and freeing an active send with unready partitions. */
#include "check.h"
#include <pthread.h>
#include <string.h>

enum { PARTS = 8, RPARTS = 4, PER = 500, N = PARTS * PER, THREADS = 4, ROUNDS = 100 };

static double *out;
static MPI_Request sreq;
static int order[PARTS];
static int failed;

static double value(int rank, int round, int i) { return rank * 1e6 + round * 1e3 + i % 977; }

struct job {
    int first, rank, round;
};

static void *fill(void *arg) {
    struct job *j = arg;
    /* Each thread takes every THREADS-th entry of this round's order. */
    for (int k = j->first; k < PARTS; k += THREADS) {
        int p = order[k];
        for (int i = p * PER; i < (p + 1) * PER; i++) out[i] = value(j->rank, j->round, i);
        if (MPI_Pready(p, sreq) != MPI_SUCCESS) failed = 1;
    }
    return NULL;
}

int main(int argc, char **argv) {
    int rank, size, provided;
    OK(MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided));
    CHECK(provided == MPI_THREAD_MULTIPLE);
    OK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    OK(MPI_Comm_size(MPI_COMM_WORLD, &size));
    check_rank = rank;
    int right = (rank + 1) % size, left = (rank + size - 1) % size;

    out = malloc(N * sizeof(double));
    double *in = malloc(N * sizeof(double));
    CHECK(out && in);
    MPI_Request rreq;
    OK(MPI_Precv_init(in, RPARTS, N / RPARTS, MPI_DOUBLE, left, 3, MPI_COMM_WORLD, MPI_INFO_NULL, &rreq));
    OK(MPI_Psend_init(out, PARTS, PER, MPI_DOUBLE, right, 3, MPI_COMM_WORLD, MPI_INFO_NULL, &sreq));
    /* Inactive: complete at once; every partition counts as arrived. */
    int flag = 0;
    OK(MPI_Test(&rreq, &flag, MPI_STATUS_IGNORE));
    CHECK(flag && rreq != MPI_REQUEST_NULL);
    OK(MPI_Parrived(rreq, 0, &flag));
    CHECK(flag);

    unsigned seed = 12345u + (unsigned)rank;
    for (int round = 0; round < ROUNDS; round++) {
        MPI_Request both[2] = {rreq, sreq};
        OK(MPI_Startall(2, both));
        for (int k = 0; k < PARTS; k++) order[k] = k;
        for (int k = PARTS - 1; k > 0; k--) {
            seed = seed * 1103515245u + 12345u;
            int m = (int)((seed >> 8) % (unsigned)(k + 1)), t = order[k];
            order[k] = order[m];
            order[m] = t;
        }
        pthread_t th[THREADS];
        struct job jobs[THREADS];
        for (int t = 0; t < THREADS; t++) {
            jobs[t] = (struct job){t, rank, round};
            CHECK(pthread_create(&th[t], NULL, fill, &jobs[t]) == 0);
        }
        /* Poll the receive's partitions while the threads fill. */
        int seen[RPARTS] = {0}, left_parts = RPARTS;
        while (left_parts > 0) {
            for (int p = 0; p < RPARTS; p++) {
                if (seen[p]) continue;
                OK(MPI_Parrived(rreq, p, &flag));
                if (!flag) continue;
                seen[p] = 1;
                left_parts--;
                int lo = p * (N / RPARTS);
                CHECK(in[lo] == value(left, round, lo));
                CHECK(in[lo + N / RPARTS - 1] == value(left, round, lo + N / RPARTS - 1));
            }
        }
        for (int t = 0; t < THREADS; t++) CHECK(pthread_join(th[t], NULL) == 0);
        CHECK(!failed);
        MPI_Status st[2];
        OK(MPI_Waitall(2, both, st));
        CHECK(both[0] == rreq && both[1] == sreq);
        int count = -1;
        OK(MPI_Get_count(&st[0], MPI_DOUBLE, &count));
        CHECK(count == N && st[0].MPI_SOURCE == left && st[0].MPI_TAG == 3);
        for (int i = 0; i < N; i++) CHECK(in[i] == value(left, round, i));
    }

    /* A vector type (two ints with a gap) in 2 partitions of 5 elements sent
     * to 4 partitions of 5 ints in a stack array (private memory: the
     * data goes through a staging area), marked with Pready_range, then
     * Pready_list. */
    MPI_Datatype gapped;
    OK(MPI_Type_vector(2, 1, 2, MPI_INT, &gapped));
    OK(MPI_Type_commit(&gapped));
    int spread[40], packed[20];
    for (int i = 0; i < 40; i++) spread[i] = rank * 1000 + i;
    MPI_Request vs, vr;
    OK(MPI_Psend_init(spread, 2, 5, gapped, right, 4, MPI_COMM_WORLD, MPI_INFO_NULL, &vs));
    OK(MPI_Precv_init(packed, 4, 5, MPI_INT, left, 4, MPI_COMM_WORLD, MPI_INFO_NULL, &vr));
    OK(MPI_Type_free(&gapped)); /* the requests hold it */
    for (int round = 0; round < 3; round++) {
        memset(packed, 0, sizeof packed);
        OK(MPI_Start(&vr));
        OK(MPI_Start(&vs));
        if (round == 0) {
            OK(MPI_Pready_range(0, 1, vs));
        } else {
            int list[2] = {1, 0};
            OK(MPI_Pready_list(2, list, vs));
        }
        OK(MPI_Request_get_status(vr, &flag, MPI_STATUS_IGNORE));
        while (!flag) OK(MPI_Request_get_status(vr, &flag, MPI_STATUS_IGNORE));
        OK(MPI_Wait(&vr, MPI_STATUS_IGNORE));
        OK(MPI_Wait(&vs, MPI_STATUS_IGNORE));
        /* Element k of the vector: ints 3k and 3k + 2 (extent 3). */
        for (int k = 0; k < 10; k++) {
            CHECK(packed[2 * k] == left * 1000 + 3 * k);
            CHECK(packed[2 * k + 1] == left * 1000 + 3 * k + 2);
        }
    }

    /* PROC_NULL: nothing moves, the status is empty. */
    MPI_Request ns;
    MPI_Status st;
    OK(MPI_Psend_init(spread, 4, 1, MPI_INT, MPI_PROC_NULL, 0, MPI_COMM_WORLD, MPI_INFO_NULL, &ns));
    OK(MPI_Start(&ns));
    OK(MPI_Pready_range(0, 3, ns));
    OK(MPI_Wait(&ns, &st));
    CHECK(st.MPI_SOURCE == MPI_PROC_NULL && st.MPI_TAG == MPI_ANY_TAG);

    /* Errors. */
    OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    OK(MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN)); /* MPI_Start's */
    MPI_Request bad = MPI_REQUEST_NULL;
    FAILS(MPI_ERR_ARG, MPI_Psend_init(out, 0, 1, MPI_INT, right, 0, MPI_COMM_WORLD, MPI_INFO_NULL, &bad));
    FAILS(MPI_ERR_COUNT, MPI_Psend_init(out, 2, -1, MPI_INT, right, 0, MPI_COMM_WORLD, MPI_INFO_NULL, &bad));
    FAILS(MPI_ERR_RANK, MPI_Precv_init(in, 2, 1, MPI_INT, MPI_ANY_SOURCE, 0, MPI_COMM_WORLD, MPI_INFO_NULL, &bad));
    FAILS(MPI_ERR_RANK, MPI_Psend_init(out, 2, 1, MPI_INT, size, 0, MPI_COMM_WORLD, MPI_INFO_NULL, &bad));
    FAILS(MPI_ERR_TAG, MPI_Precv_init(in, 2, 1, MPI_INT, left, MPI_ANY_TAG, MPI_COMM_WORLD, MPI_INFO_NULL, &bad));
    FAILS(MPI_ERR_TYPE, MPI_Psend_init(out, 2, 1, MPI_DATATYPE_NULL, right, 0, MPI_COMM_WORLD, MPI_INFO_NULL, &bad));
    FAILS(MPI_ERR_ARG, MPI_Psend_init(out, 2, 1, MPI_INT, right, 0, MPI_COMM_WORLD, MPI_INFO_NULL, NULL));
    FAILS(MPI_ERR_COUNT, MPI_Psend_init_c(out, 2, (MPI_Count)-5, MPI_INT, right, 0, MPI_COMM_WORLD, MPI_INFO_NULL, &bad));
    CHECK(bad == MPI_REQUEST_NULL);
    FAILS(MPI_ERR_ARG, MPI_Pready(0, ns)); /* inactive */
    OK(MPI_Start(&ns));
    FAILS(MPI_ERR_REQUEST, MPI_Start(&ns)); /* active */
    FAILS(MPI_ERR_ARG, MPI_Pready(4, ns));
    FAILS(MPI_ERR_ARG, MPI_Pready(-1, ns));
    FAILS(MPI_ERR_ARG, MPI_Pready_range(2, 1, ns));
    int wrong[2] = {0, 7};
    FAILS(MPI_ERR_ARG, MPI_Pready_list(2, wrong, ns));
    OK(MPI_Pready(2, ns));
    FAILS(MPI_ERR_ARG, MPI_Pready(2, ns)); /* twice */
    FAILS(MPI_ERR_REQUEST, MPI_Parrived(ns, 0, &flag)); /* a send */
    FAILS(MPI_ERR_REQUEST, MPI_Cancel(&ns));
    int rest[3] = {0, 1, 3};
    OK(MPI_Pready_list(3, rest, ns));
    OK(MPI_Wait(&ns, MPI_STATUS_IGNORE));
    FAILS(MPI_ERR_REQUEST, MPI_Pready(0, rreq)); /* a receive */
    FAILS(MPI_ERR_ARG, MPI_Parrived(rreq, RPARTS, &flag));
    MPI_Request plain;
    OK(MPI_Send_init(out, 1, MPI_INT, right, 0, MPI_COMM_WORLD, &plain));
    FAILS(MPI_ERR_REQUEST, MPI_Pready(0, plain)); /* not partitioned */
    OK(MPI_Request_free(&plain));
    /* Freeing an active send with a partition not marked ready would leave
     * a round that can never complete: refused, the request kept. */
    OK(MPI_Start(&ns));
    OK(MPI_Pready_range(0, 2, ns));
    FAILS(MPI_ERR_REQUEST, MPI_Request_free(&ns));
    CHECK(ns != MPI_REQUEST_NULL);
    OK(MPI_Pready(3, ns));

    OK(MPI_Request_free(&ns));
    OK(MPI_Request_free(&vs));
    OK(MPI_Request_free(&vr));
    OK(MPI_Request_free(&sreq));
    OK(MPI_Request_free(&rreq));
    CHECK(rreq == MPI_REQUEST_NULL);
    FAILS(MPI_ERR_REQUEST, MPI_Pready(0, sreq)); /* freed: MPI_REQUEST_NULL */
    free(out);
    free(in);
    OK(MPI_Barrier(MPI_COMM_WORLD));
    PASSED("partitioned");
    OK(MPI_Finalize());
    return 0;
}
