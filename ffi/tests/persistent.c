/* Persistent point-to-point requests: a ring of persistent sends and
 * receives restarted 1000 times, started with a persistent allreduce and
 * barrier in one MPI_Startall; every mode (standard, synchronous, ready),
 * a non-contiguous datatype, the large-count forms, the test family on
 * persistent requests, cancel, free, and the argument errors. */
#include "check.h"
#include <string.h>

#define N 64
#define ROUNDS 1000

int main(int argc, char **argv) {
    int rank, size;
    OK(MPI_Init(&argc, &argv));
    OK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    OK(MPI_Comm_size(MPI_COMM_WORLD, &size));
    check_rank = rank;
    int right = (rank + 1) % size, left = (rank + size - 1) % size;

    /* The ring: receive from the left, send to the right, an allreduce
     * and a barrier, all in one MPI_Startall, restarted ROUNDS times. */
    int out[N], in[N];
    double x = 0, sum = 0;
    MPI_Request r[4];
    OK(MPI_Recv_init(in, N, MPI_INT, left, 7, MPI_COMM_WORLD, &r[0]));
    OK(MPI_Send_init(out, N, MPI_INT, right, 7, MPI_COMM_WORLD, &r[1]));
    OK(MPI_Allreduce_init(&x, &sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD, MPI_INFO_NULL, &r[2]));
    OK(MPI_Barrier_init(MPI_COMM_WORLD, MPI_INFO_NULL, &r[3]));
    /* Inactive persistent requests complete at once, with an empty status. */
    {
        MPI_Status st;
        int flag = 0;
        OK(MPI_Test(&r[0], &flag, &st));
        CHECK(flag && r[0] != MPI_REQUEST_NULL && st.MPI_SOURCE == MPI_ANY_SOURCE);
        OK(MPI_Wait(&r[1], &st));
        CHECK(r[1] != MPI_REQUEST_NULL && st.MPI_TAG == MPI_ANY_TAG);
    }
    for (int it = 0; it < ROUNDS; it++) {
        for (int i = 0; i < N; i++) {
            out[i] = rank * 100000 + it * 10 + i % 10;
            in[i] = -1;
        }
        x = rank + it;
        MPI_Status st[4];
        OK(MPI_Startall(4, r));
        if (it % 3 == 0) {
            OK(MPI_Waitall(4, r, st));
        } else if (it % 3 == 1) {
            int flag = 0;
            while (!flag)
                OK(MPI_Testall(4, r, &flag, st));
        } else {
            for (int k = 0; k < 4; k++) {
                int idx = -1;
                OK(MPI_Waitany(4, r, &idx, &st[0]));
                CHECK(idx >= 0 && idx < 4);
                if (idx == 0)
                    st[1] = st[0];
            }
            st[0] = st[1];
        }
        for (int k = 0; k < 4; k++)
            CHECK(r[k] != MPI_REQUEST_NULL);
        CHECK(st[0].MPI_SOURCE == left && st[0].MPI_TAG == 7);
        int n = -1;
        OK(MPI_Get_count(&st[0], MPI_INT, &n));
        CHECK(n == N);
        for (int i = 0; i < N; i++)
            CHECK(in[i] == left * 100000 + it * 10 + i % 10);
        double want = (double)size * (size - 1) / 2 + (double)size * it;
        CHECK(sum == want);
    }
    /* After completion MPI_Start works again, on one request at a time. */
    OK(MPI_Start(&r[3]));
    OK(MPI_Wait(&r[3], MPI_STATUS_IGNORE));
    for (int k = 0; k < 4; k++) {
        OK(MPI_Request_free(&r[k]));
        CHECK(r[k] == MPI_REQUEST_NULL);
    }

    /* Synchronous and ready modes, and a non-contiguous datatype on the
     * receiving side (every second int), with the large-count forms. */
    MPI_Datatype every_other;
    OK(MPI_Type_vector(N, 1, 2, MPI_INT, &every_other));
    OK(MPI_Type_commit(&every_other));
    int wide[2 * N];
    MPI_Request s[3];
    OK(MPI_Recv_init_c(wide, 1, every_other, left, 8, MPI_COMM_WORLD, &s[0]));
    OK(MPI_Ssend_init(out, N, MPI_INT, right, 8, MPI_COMM_WORLD, &s[1]));
    OK(MPI_Rsend_init_c(out, N, MPI_INT, right, 9, MPI_COMM_WORLD, &s[2]));
    /* The program may free the datatype before the request. */
    OK(MPI_Type_free(&every_other));
    CHECK(every_other == MPI_DATATYPE_NULL);
    for (int it = 0; it < 50; it++) {
        for (int i = 0; i < N; i++)
            out[i] = rank * 1000 + it + i;
        for (int i = 0; i < 2 * N; i++)
            wide[i] = -7;
        /* Ssend: the receive is started first (as the ready send needs,
         * for the barrier orders it before the other's send). */
        OK(MPI_Start(&s[0]));
        OK(MPI_Barrier(MPI_COMM_WORLD));
        OK(MPI_Start(&s[1]));
        MPI_Status st;
        OK(MPI_Wait(&s[0], &st));
        OK(MPI_Wait(&s[1], MPI_STATUS_IGNORE));
        CHECK(st.MPI_SOURCE == left && st.MPI_TAG == 8);
        for (int i = 0; i < N; i++) {
            CHECK(wide[2 * i] == left * 1000 + it + i);
            CHECK(wide[2 * i + 1] == -7);
        }
        /* Ready mode: the matching receive is posted before the barrier. */
        MPI_Request rr;
        OK(MPI_Irecv(in, N, MPI_INT, left, 9, MPI_COMM_WORLD, &rr));
        OK(MPI_Barrier(MPI_COMM_WORLD));
        OK(MPI_Start(&s[2]));
        OK(MPI_Wait(&s[2], MPI_STATUS_IGNORE));
        OK(MPI_Wait(&rr, MPI_STATUS_IGNORE));
        for (int i = 0; i < N; i++)
            CHECK(in[i] == left * 1000 + it + i);
    }
    for (int k = 0; k < 3; k++)
        OK(MPI_Request_free(&s[k]));

    /* The program may free the communicator before the request: the
     * request keeps it. */
    {
        MPI_Comm c2;
        MPI_Request q[2];
        OK(MPI_Comm_dup(MPI_COMM_WORLD, &c2));
        OK(MPI_Recv_init(in, N, MPI_INT, left, 1, c2, &q[0]));
        OK(MPI_Send_init(out, N, MPI_INT, right, 1, c2, &q[1]));
        OK(MPI_Comm_free(&c2));
        CHECK(c2 == MPI_COMM_NULL);
        for (int it = 0; it < 5; it++) {
            for (int i = 0; i < N; i++)
                out[i] = rank + it + i;
            MPI_Status st[2];
            OK(MPI_Startall(2, q));
            OK(MPI_Waitall(2, q, st));
            CHECK(st[0].MPI_SOURCE == left);
            for (int i = 0; i < N; i++)
                CHECK(in[i] == left + it + i);
        }
        OK(MPI_Request_free(&q[0]));
        OK(MPI_Request_free(&q[1]));
    }

    /* MPI_PROC_NULL: a persistent receive completes at once with
     * MPI_PROC_NULL as its source. */
    {
        MPI_Request p;
        MPI_Status st;
        OK(MPI_Recv_init(in, N, MPI_INT, MPI_PROC_NULL, 0, MPI_COMM_WORLD, &p));
        for (int it = 0; it < 3; it++) {
            OK(MPI_Start(&p));
            OK(MPI_Wait(&p, &st));
            CHECK(st.MPI_SOURCE == MPI_PROC_NULL);
            int n = -1;
            OK(MPI_Get_count(&st, MPI_INT, &n));
            CHECK(n == 0);
        }
        OK(MPI_Request_free(&p));
    }

    /* Cancel: a persistent receive nobody sends to is cancelled, completed,
     * and then started and matched. */
    {
        MPI_Request p;
        MPI_Status st;
        int got = -1, flag = 0;
        OK(MPI_Recv_init(&got, 1, MPI_INT, left, 99, MPI_COMM_WORLD, &p));
        OK(MPI_Start(&p));
        OK(MPI_Cancel(&p));
        OK(MPI_Wait(&p, &st));
        OK(MPI_Test_cancelled(&st, &flag));
        CHECK(flag);
        CHECK(p != MPI_REQUEST_NULL);
        /* Nobody sends before every process has cancelled. */
        OK(MPI_Barrier(MPI_COMM_WORLD));
        OK(MPI_Start(&p));
        int v = rank + 5;
        OK(MPI_Send(&v, 1, MPI_INT, right, 99, MPI_COMM_WORLD));
        OK(MPI_Wait(&p, &st));
        OK(MPI_Test_cancelled(&st, &flag));
        CHECK(!flag && got == left + 5);
        OK(MPI_Request_free(&p));
    }

    /* Argument errors, under MPI_ERRORS_RETURN. */
    OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    OK(MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN));
    {
        MPI_Request p = MPI_REQUEST_NULL;
        FAILS(MPI_ERR_RANK, MPI_Send_init(out, 1, MPI_INT, size, 0, MPI_COMM_WORLD, &p));
        FAILS(MPI_ERR_RANK, MPI_Recv_init(in, 1, MPI_INT, -5, 0, MPI_COMM_WORLD, &p));
        FAILS(MPI_ERR_TAG, MPI_Send_init(out, 1, MPI_INT, right, -3, MPI_COMM_WORLD, &p));
        FAILS(MPI_ERR_COUNT, MPI_Send_init(out, -1, MPI_INT, right, 0, MPI_COMM_WORLD, &p));
        FAILS(MPI_ERR_COUNT, MPI_Ssend_init_c(out, -1, MPI_INT, right, 0, MPI_COMM_WORLD, &p));
        FAILS(MPI_ERR_TYPE, MPI_Send_init(out, 1, MPI_DATATYPE_NULL, right, 0, MPI_COMM_WORLD, &p));
        FAILS(MPI_ERR_COMM, MPI_Recv_init(in, 1, MPI_INT, left, 0, MPI_COMM_NULL, &p));
        FAILS(MPI_ERR_ARG, MPI_Send_init(out, 1, MPI_INT, right, 0, MPI_COMM_WORLD, NULL));
        CHECK(p == MPI_REQUEST_NULL);
        /* Starting an active request is an error; the request stays. */
        int got = 0;
        OK(MPI_Recv_init(&got, 1, MPI_INT, left, 55, MPI_COMM_WORLD, &p));
        OK(MPI_Start(&p));
        FAILS(MPI_ERR_REQUEST, MPI_Start(&p));
        int v = rank;
        OK(MPI_Send(&v, 1, MPI_INT, right, 55, MPI_COMM_WORLD));
        OK(MPI_Wait(&p, MPI_STATUS_IGNORE));
        CHECK(got == left);
        OK(MPI_Request_free(&p));
        /* A nonblocking request is not persistent. */
        MPI_Request q;
        OK(MPI_Irecv(&got, 1, MPI_INT, left, 56, MPI_COMM_WORLD, &q));
        FAILS(MPI_ERR_REQUEST, MPI_Start(&q));
        OK(MPI_Send(&v, 1, MPI_INT, right, 56, MPI_COMM_WORLD));
        OK(MPI_Wait(&q, MPI_STATUS_IGNORE));
    }

    OK(MPI_Barrier(MPI_COMM_WORLD));
    PASSED("persistent");
    OK(MPI_Finalize());
    return 0;
}
