/* Ownership passing from C: buffers given and taken between two ranks
 * move without a copy (the taker gets the giver's very buffer), OPI and
 * MPI operations match each other (by copying), requests, and errors. */
#include "check.h"
#include <opi.h>
#include <stdint.h>
#include <string.h>

static int peer;

static int owner(const void *p) {
    int o = -1;
    OK(HMPI_Heap_owner(p, &o));
    return o;
}

static void pass_the_buffer_around(void) {
    /* One buffer travels 0 -> 1 -> 0 ... in place; each hop adds one. */
    int n = 1 << 16;
    long *buf = NULL;
    uintptr_t first = 0;
    if (check_rank == 0) {
        OK(OPI_Alloc(&buf, (size_t)n * sizeof *buf));
        CHECK(buf != NULL && ((uintptr_t)buf & 63) == 0 && owner(buf) == 0);
        for (int i = 0; i < n; i++) buf[i] = i;
        first = (uintptr_t)buf;
        OK(OPI_Give(&buf, n, MPI_LONG, peer, 1, MPI_COMM_WORLD));
        CHECK(buf == NULL);
    }
    for (int hop = 1; hop <= 20; hop++) {
        if ((hop % 2 == 1) == (check_rank == 1)) {
            MPI_Status st;
            int count;
            OK(OPI_Take(&buf, n, MPI_LONG, peer, 1, MPI_COMM_WORLD, &st));
            CHECK(buf != NULL && st.MPI_SOURCE == peer && st.MPI_TAG == 1);
            OK(MPI_Get_count(&st, MPI_LONG, &count));
            CHECK(count == n);
            /* The very buffer rank 0 allocated: no copy. */
            CHECK(owner(buf) == 0);
            for (int i = 0; i < n; i++) CHECK(buf[i] == i + hop - 1);
            for (int i = 0; i < n; i++) buf[i]++;
            if (hop < 20) {
                OK(OPI_Give(&buf, n, MPI_LONG, peer, 1, MPI_COMM_WORLD));
                CHECK(buf == NULL);
            }
        }
    }
    if (check_rank == 0) {
        /* Hop 20 ended here, with rank 0's own buffer. */
        CHECK((uintptr_t)buf == first);
        OK(OPI_Free(&buf));
        CHECK(buf == NULL);
    }
    OK(MPI_Barrier(MPI_COMM_WORLD));
}

static void mixed_with_mpi(void) {
    /* Give -> MPI_Recv copies; MPI_Send -> OPI_Take gets a fresh buffer. */
    double *g = NULL, recv[100];
    if (check_rank == 0) {
        OK(OPI_Alloc(&g, 100 * sizeof *g));
        for (int i = 0; i < 100; i++) g[i] = i * 0.5;
        OK(OPI_Give(&g, 100, MPI_DOUBLE, peer, 2, MPI_COMM_WORLD));
        double out[50];
        for (int i = 0; i < 50; i++) out[i] = -i;
        OK(MPI_Send(out, 50, MPI_DOUBLE, peer, 3, MPI_COMM_WORLD));
    } else {
        OK(MPI_Recv(recv, 100, MPI_DOUBLE, peer, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        for (int i = 0; i < 100; i++) CHECK(recv[i] == i * 0.5);
        MPI_Status st;
        int count;
        OK(OPI_Take(&g, 64, MPI_DOUBLE, peer, 3, MPI_COMM_WORLD, &st));
        OK(MPI_Get_count(&st, MPI_DOUBLE, &count));
        CHECK(g != NULL && count == 50 && owner(g) == check_rank);
        for (int i = 0; i < 50; i++) CHECK(g[i] == -i);
        OK(OPI_Free(&g));
    }
    OK(MPI_Barrier(MPI_COMM_WORLD));
}

static void requests_and_malloc(void) {
    /* malloc'd buffers can be given too; Itake sets the pointer when the
     * request completes, and taken buffers are 64-byte aligned. */
    enum { K = 8 };
    MPI_Request r[K];
    int *bufs[K];
    if (check_rank == 0) {
        for (int k = 0; k < K; k++) {
            size_t n = (size_t)1 << (3 * k % 20);
            bufs[k] = malloc(n * sizeof(int));
            for (size_t i = 0; i < n; i++) bufs[k][i] = (int)(k * 1000 + i);
            OK(OPI_Igive(&bufs[k], (int)n, MPI_INT, peer, 10 + k, MPI_COMM_WORLD, &r[k]));
            CHECK(bufs[k] == NULL);
        }
        OK(MPI_Waitall(K, r, MPI_STATUSES_IGNORE));
    } else {
        for (int k = K - 1; k >= 0; k--) {
            bufs[k] = (int *)&r; /* must become the taken buffer */
            OK(OPI_Itake(&bufs[k], 1 << 20, MPI_INT, MPI_ANY_SOURCE, 10 + k, MPI_COMM_WORLD, &r[k]));
        }
        MPI_Status st[K];
        OK(MPI_Waitall(K, r, st));
        for (int k = 0; k < K; k++) {
            size_t n = (size_t)1 << (3 * k % 20);
            int count;
            OK(MPI_Get_count(&st[k], MPI_INT, &count));
            CHECK(bufs[k] != NULL && (size_t)count == n && st[k].MPI_SOURCE == peer);
            /* (A malloc'd buffer less aligned than OPI's 64 bytes arrives
             * as a copy; an aligned one in place.) */
            CHECK(((uintptr_t)bufs[k] & 63) == 0);
            for (size_t i = 0; i < n; i++) CHECK(bufs[k][i] == (int)(k * 1000 + i));
            free(bufs[k]); /* plain free works as well */
        }
    }
    OK(MPI_Barrier(MPI_COMM_WORLD));
}

static void errors(void) {
    /* (An invalid communicator raises on MPI_COMM_SELF, as MPI 4 says.) */
    OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    OK(MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN));
    int stack[4] = {1, 2, 3, 4};
    int *p = stack, *q = NULL;
    FAILS(MPI_ERR_BUFFER, OPI_Give(&p, 4, MPI_INT, peer, 0, MPI_COMM_WORLD));
    CHECK(p == stack); /* a failed give leaves the pointer */
    FAILS(MPI_ERR_BUFFER, OPI_Give(&q, 4, MPI_INT, peer, 0, MPI_COMM_WORLD));
    FAILS(MPI_ERR_ARG, OPI_Give(NULL, 4, MPI_INT, peer, 0, MPI_COMM_WORLD));
    OK(OPI_Alloc(&q, 16));
    FAILS(MPI_ERR_COUNT, OPI_Give(&q, 1 << 20, MPI_INT, peer, 0, MPI_COMM_WORLD));
    FAILS(MPI_ERR_RANK, OPI_Give(&q, 1, MPI_INT, 5, 0, MPI_COMM_WORLD));
    FAILS(MPI_ERR_TAG, OPI_Give(&q, 1, MPI_INT, peer, -4, MPI_COMM_WORLD));
    FAILS(MPI_ERR_TYPE, OPI_Give(&q, 1, MPI_SHORT_INT, peer, 0, MPI_COMM_WORLD));
    FAILS(MPI_ERR_COMM, OPI_Give(&q, 1, MPI_INT, peer, 0, MPI_COMM_NULL));
    CHECK(q != NULL);
    OK(OPI_Free(&q));
    OK(OPI_Free(&q)); /* NULL: nothing to do */
    FAILS(MPI_ERR_BUFFER, OPI_Free(&p));
    /* A take from MPI_PROC_NULL gets NULL. */
    q = (int *)stack;
    MPI_Status st;
    OK(OPI_Take(&q, 1, MPI_INT, MPI_PROC_NULL, 0, MPI_COMM_WORLD, &st));
    CHECK(q == NULL && st.MPI_SOURCE == MPI_PROC_NULL);
    /* A buffer larger than the take allows: MPI_ERR_TRUNCATE, NULL. */
    if (check_rank == 0) {
        OK(OPI_Alloc(&q, 400));
        OK(OPI_Give(&q, 100, MPI_INT, peer, 40, MPI_COMM_WORLD));
    } else {
        FAILS(MPI_ERR_TRUNCATE, OPI_Take(&q, 10, MPI_INT, peer, 40, MPI_COMM_WORLD, &st));
        CHECK(q == NULL && st.MPI_ERROR == MPI_ERR_TRUNCATE);
    }
    OK(MPI_Barrier(MPI_COMM_WORLD));
}

int main(int argc, char **argv) {
    int size;
    OK(MPI_Init(&argc, &argv));
    OK(MPI_Comm_rank(MPI_COMM_WORLD, &check_rank));
    OK(MPI_Comm_size(MPI_COMM_WORLD, &size));
    CHECK(size == 2);
    peer = 1 - check_rank;
    pass_the_buffer_around();
    mixed_with_mpi();
    requests_and_malloc();
    errors();
    OK(MPI_Finalize());
    PASSED("opi");
    return 0;
}
