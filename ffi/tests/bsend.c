/* Buffered sends: MPI_Bsend, MPI_Ibsend and MPI_Bsend_init within the
 * attached buffer's capacity (returning before any receive is posted), a
 * message that does not fit -> MPI_ERR_BUFFER, no buffer -> MPI_ERR_BUFFER,
 * detach waiting for the buffered messages, a non-contiguous datatype, the
 * large-count forms. */
#include "check.h"
#include <stdlib.h>
#include <string.h>

#define N 1000
#define MSGS 8

int main(int argc, char **argv) {
    int rank, size;
    OK(MPI_Init(&argc, &argv));
    OK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    OK(MPI_Comm_size(MPI_COMM_WORLD, &size));
    check_rank = rank;
    int right = (rank + 1) % size, left = (rank + size - 1) % size;
    OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    OK(MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN));

    static double out[MSGS][N], in[N];
    /* No buffer attached: refused. */
    FAILS(MPI_ERR_BUFFER, MPI_Bsend(out[0], N, MPI_DOUBLE, right, 0, MPI_COMM_WORLD));
    void *none = NULL;
    int got_size = -1;
    FAILS(MPI_ERR_BUFFER, MPI_Buffer_detach(&none, &got_size));

    /* Room for MSGS messages exactly. */
    int packsize = 0;
    OK(MPI_Pack_size(N, MPI_DOUBLE, MPI_COMM_WORLD, &packsize));
    CHECK(packsize >= N * (int)sizeof(double));
    int cap = MSGS * (N * (int)sizeof(double) + MPI_BSEND_OVERHEAD);
    char *space = malloc((size_t)cap);
    CHECK(space != NULL);
    OK(MPI_Buffer_attach(space, cap));
    FAILS(MPI_ERR_BUFFER, MPI_Buffer_attach(space, cap));

    for (int round = 0; round < 20; round++) {
        /* Everyone sends all its messages before anyone receives: a
         * buffered send returns whatever the receiver does. */
        for (int m = 0; m < MSGS; m++) {
            for (int i = 0; i < N; i++)
                out[m][i] = rank * 1e6 + round * 1e3 + m + i * 1e-3;
            if (m % 2 == 0) {
                OK(MPI_Bsend(out[m], N, MPI_DOUBLE, right, m, MPI_COMM_WORLD));
            } else {
                MPI_Request r;
                OK(MPI_Ibsend(out[m], N, MPI_DOUBLE, right, m, MPI_COMM_WORLD, &r));
                OK(MPI_Wait(&r, MPI_STATUS_IGNORE));
            }
            /* The copy is taken: the program may reuse its buffer. */
            memset(out[m], 0, sizeof out[m]);
        }
        /* The buffer is full until the messages go. */
        if (round == 0) {
            double one = 1;
            FAILS(MPI_ERR_BUFFER, MPI_Bsend(&one, 1, MPI_DOUBLE, right, 99, MPI_COMM_WORLD));
        }
        OK(MPI_Barrier(MPI_COMM_WORLD));
        for (int m = MSGS - 1; m >= 0; m--) {
            MPI_Status st;
            OK(MPI_Recv(in, N, MPI_DOUBLE, left, m, MPI_COMM_WORLD, &st));
            CHECK(st.MPI_SOURCE == left && st.MPI_TAG == m);
            for (int i = 0; i < N; i++)
                CHECK(in[i] == left * 1e6 + round * 1e3 + m + i * 1e-3);
        }
        /* Everyone's messages have been received before anyone sends the
         * next round's (the capacity comes back as they go). */
        OK(MPI_Barrier(MPI_COMM_WORLD));
    }

    /* A message larger than the whole buffer. */
    double *big = calloc((size_t)cap, 1);
    CHECK(big != NULL);
    FAILS(MPI_ERR_BUFFER, MPI_Bsend(big, cap / (int)sizeof(double), MPI_DOUBLE, right, 1, MPI_COMM_WORLD));
    free(big);
    /* Argument errors come before capacity. */
    FAILS(MPI_ERR_RANK, MPI_Bsend(in, 1, MPI_DOUBLE, size, 0, MPI_COMM_WORLD));
    FAILS(MPI_ERR_TAG, MPI_Bsend(in, 1, MPI_DOUBLE, right, -2, MPI_COMM_WORLD));
    FAILS(MPI_ERR_COUNT, MPI_Bsend(in, -1, MPI_DOUBLE, right, 0, MPI_COMM_WORLD));
    FAILS(MPI_ERR_COUNT, MPI_Bsend_c(in, -1, MPI_DOUBLE, right, 0, MPI_COMM_WORLD));
    FAILS(MPI_ERR_TYPE, MPI_Bsend(in, 1, MPI_DATATYPE_NULL, right, 0, MPI_COMM_WORLD));
    OK(MPI_Bsend(NULL, 0, MPI_DATATYPE_NULL, MPI_PROC_NULL, 0, MPI_COMM_WORLD));

    /* Persistent buffered sends of a strided datatype, restarted; the
     * large-count form. */
    MPI_Datatype every_other;
    OK(MPI_Type_vector(N / 2, 1, 2, MPI_DOUBLE, &every_other));
    OK(MPI_Type_commit(&every_other));
    MPI_Request p;
    OK(MPI_Bsend_init_c(out[0], 1, every_other, right, 5, MPI_COMM_WORLD, &p));
    for (int it = 0; it < 50; it++) {
        for (int i = 0; i < N; i++)
            out[0][i] = (i % 2) ? -1.0 : rank + it + i;
        OK(MPI_Start(&p));
        OK(MPI_Wait(&p, MPI_STATUS_IGNORE));
        OK(MPI_Recv(in, N / 2, MPI_DOUBLE, left, 5, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        for (int i = 0; i < N / 2; i++)
            CHECK(in[i] == left + it + 2 * i);
    }
    OK(MPI_Request_free(&p));
    OK(MPI_Type_free(&every_other));

    /* Flush and detach wait until the buffered messages have gone (here
     * received, as a message of this size leaves when its receiver copies
     * it). */
    MPI_Request rr;
    OK(MPI_Bsend_c(out[1], N, MPI_DOUBLE, right, 7, MPI_COMM_WORLD));
    OK(MPI_Irecv(in, N, MPI_DOUBLE, left, 8, MPI_COMM_WORLD, &rr));
    OK(MPI_Bsend(out[2], N, MPI_DOUBLE, right, 8, MPI_COMM_WORLD));
    OK(MPI_Wait(&rr, MPI_STATUS_IGNORE));
    OK(MPI_Recv(in, N, MPI_DOUBLE, left, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
    OK(MPI_Buffer_flush());
    OK(MPI_Bsend(out[3], N, MPI_DOUBLE, right, 9, MPI_COMM_WORLD));
    OK(MPI_Recv(in, N, MPI_DOUBLE, left, 9, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
    char *back = NULL;
    OK(MPI_Buffer_detach(&back, &got_size));
    CHECK(back == space && got_size == cap);
    FAILS(MPI_ERR_BUFFER, MPI_Bsend(in, 1, MPI_DOUBLE, right, 0, MPI_COMM_WORLD));
    MPI_Count big_size = 0;
    OK(MPI_Buffer_attach_c(space, (MPI_Count)cap));
    OK(MPI_Buffer_detach_c(&back, &big_size));
    CHECK(back == space && big_size == cap);
    free(space);

    /* A communicator's own buffer (MPI 4.1): its buffered sends use it,
     * while the process has none attached. */
    {
        MPI_Comm c2;
        OK(MPI_Comm_dup(MPI_COMM_WORLD, &c2));
        int csize = N * (int)sizeof(double) + MPI_BSEND_OVERHEAD;
        char *cspace = malloc((size_t)csize);
        CHECK(cspace != NULL);
        OK(MPI_Comm_attach_buffer(c2, cspace, csize));
        FAILS(MPI_ERR_BUFFER, MPI_Comm_attach_buffer(c2, cspace, csize));
        OK(MPI_Bsend(out[0], N, MPI_DOUBLE, right, 11, c2));
        FAILS(MPI_ERR_BUFFER, MPI_Bsend(out[0], N, MPI_DOUBLE, right, 12, c2));
        FAILS(MPI_ERR_BUFFER, MPI_Bsend(out[0], 1, MPI_DOUBLE, right, 12, MPI_COMM_WORLD));
        /* Nobody receives the first message before every rank has seen its
         * buffer full. */
        OK(MPI_Barrier(c2));
        OK(MPI_Recv(in, N, MPI_DOUBLE, left, 11, c2, MPI_STATUS_IGNORE));
        OK(MPI_Comm_flush_buffer(c2));
        void *cb = NULL;
        int cs = 0;
        OK(MPI_Comm_detach_buffer(c2, &cb, &cs));
        CHECK(cb == cspace && cs == csize);
        FAILS(MPI_ERR_BUFFER, MPI_Comm_detach_buffer(c2, &cb, &cs));
        MPI_Count cs_c = 0;
        OK(MPI_Comm_attach_buffer_c(c2, cspace, (MPI_Count)csize));
        OK(MPI_Comm_detach_buffer_c(c2, &cb, &cs_c));
        CHECK(cb == cspace && cs_c == csize);
        free(cspace);
        OK(MPI_Comm_free(&c2));
    }

    OK(MPI_Barrier(MPI_COMM_WORLD));
    PASSED("bsend");
    OK(MPI_Finalize());
    return 0;
}
