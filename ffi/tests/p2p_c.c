/* The large-count point-to-point routines (one message of more than
 * 2^31 bytes with MPI_Send_c when memory allows), MPI_Isendrecv and
 * MPI_Isendrecv_replace (and their _c forms), MPI_Get_elements (_c, _x)
 * and MPI_Status_set_elements (_c, _x), and their errors. */
#include "check.h"
#include <stdint.h>
#include <string.h>

#define N 100

int main(int argc, char **argv) {
    int rank, size;
    OK(MPI_Init(&argc, &argv));
    OK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    OK(MPI_Comm_size(MPI_COMM_WORLD, &size));
    check_rank = rank;
    int right = (rank + 1) % size, left = (rank + size - 1) % size;
    int out[N], in[N];
    for (int i = 0; i < N; i++) out[i] = rank * 1000 + i;
    MPI_Status st;
    MPI_Count n = -1;

    /* Blocking, synchronous and ready sends, each into a receive. */
    MPI_Request r;
    OK(MPI_Irecv_c(in, N, MPI_INT, left, 1, MPI_COMM_WORLD, &r));
    OK(MPI_Send_c(out, N, MPI_INT, right, 1, MPI_COMM_WORLD));
    OK(MPI_Wait(&r, &st));
    OK(MPI_Get_count_c(&st, MPI_INT, &n));
    CHECK(n == N && in[N - 1] == left * 1000 + N - 1 && st.MPI_SOURCE == left);
    OK(MPI_Irecv_c(in, N, MPI_INT, left, 2, MPI_COMM_WORLD, &r));
    OK(MPI_Barrier(MPI_COMM_WORLD)); /* every receive posted: ready mode */
    OK(MPI_Rsend_c(out, N / 2, MPI_INT, right, 2, MPI_COMM_WORLD));
    OK(MPI_Wait(&r, &st));
    OK(MPI_Get_count_c(&st, MPI_INT, &n));
    CHECK(n == N / 2);
    MPI_Request s[3];
    OK(MPI_Issend_c(out, 3, MPI_INT, right, 3, MPI_COMM_WORLD, &s[0]));
    OK(MPI_Isend_c(out, 4, MPI_INT, right, 4, MPI_COMM_WORLD, &s[1]));
    OK(MPI_Irsend_c(out, 0, MPI_INT, MPI_PROC_NULL, 4, MPI_COMM_WORLD, &s[2]));
    OK(MPI_Recv_c(in, N, MPI_INT, left, 3, MPI_COMM_WORLD, &st));
    OK(MPI_Get_count_c(&st, MPI_INT, &n));
    CHECK(n == 3 && in[2] == left * 1000 + 2);
    OK(MPI_Recv_c(in, N, MPI_INT, left, 4, MPI_COMM_WORLD, &st));
    OK(MPI_Waitall(3, s, MPI_STATUSES_IGNORE));
    OK(MPI_Irecv_c(in, N, MPI_INT, left, 5, MPI_COMM_WORLD, &r));
    OK(MPI_Ssend_c(out, 5, MPI_INT, right, 5, MPI_COMM_WORLD));
    OK(MPI_Wait(&r, &st));
    OK(MPI_Get_count_c(&st, MPI_INT, &n));
    CHECK(n == 5 && in[4] == left * 1000 + 4);

    /* Send-receive, and in place. */
    OK(MPI_Sendrecv_c(out, N, MPI_INT, right, 6, in, N, MPI_INT, left, 6, MPI_COMM_WORLD, &st));
    CHECK(in[7] == left * 1000 + 7);
    int buf[N];
    memcpy(buf, out, sizeof buf);
    OK(MPI_Sendrecv_replace_c(buf, N, MPI_INT, right, 7, left, 7, MPI_COMM_WORLD, &st));
    CHECK(buf[9] == left * 1000 + 9);

    /* Matched probes. */
    MPI_Message msg;
    OK(MPI_Isend_c(out, 6, MPI_INT, right, 8, MPI_COMM_WORLD, &s[0]));
    OK(MPI_Mprobe(left, 8, MPI_COMM_WORLD, &msg, &st));
    OK(MPI_Mrecv_c(in, N, MPI_INT, &msg, &st));
    CHECK(msg == MPI_MESSAGE_NULL && in[5] == left * 1000 + 5);
    OK(MPI_Wait(&s[0], MPI_STATUS_IGNORE));
    OK(MPI_Isend_c(out, 2, MPI_INT, right, 9, MPI_COMM_WORLD, &s[0]));
    OK(MPI_Mprobe(left, 9, MPI_COMM_WORLD, &msg, &st));
    OK(MPI_Imrecv_c(in, N, MPI_INT, &msg, &r));
    OK(MPI_Wait(&r, &st));
    OK(MPI_Get_count_c(&st, MPI_INT, &n));
    CHECK(n == 2);
    OK(MPI_Wait(&s[0], MPI_STATUS_IGNORE));

    /* MPI_Isendrecv around the ring, 50 times, completed by a test loop
     * and by a wait; the _c and replacing forms. */
    for (int k = 0; k < 50; k++) {
        int a = rank * 100 + k, b = -1;
        OK(MPI_Isendrecv(&a, 1, MPI_INT, right, 10, &b, 1, MPI_INT, left, 10, MPI_COMM_WORLD, &r));
        int flag = 0;
        if (k % 2) {
            while (!flag) OK(MPI_Test(&r, &flag, &st));
        } else {
            OK(MPI_Wait(&r, &st));
        }
        CHECK(r == MPI_REQUEST_NULL);
        CHECK(b == left * 100 + k && st.MPI_SOURCE == left && st.MPI_TAG == 10);
    }
    OK(MPI_Isendrecv_c(out, N, MPI_INT, right, 11, in, N, MPI_INT, MPI_ANY_SOURCE, 11, MPI_COMM_WORLD, &r));
    OK(MPI_Wait(&r, &st));
    CHECK(in[N - 1] == left * 1000 + N - 1 && st.MPI_SOURCE == left);
    MPI_Datatype pair;
    OK(MPI_Type_vector(2, 1, 3, MPI_INT, &pair)); /* ints 0 and 3 of 4 */
    OK(MPI_Type_commit(&pair));
    for (int i = 0; i < N; i++) buf[i] = rank * 1000 + i;
    MPI_Request two[2];
    OK(MPI_Isendrecv_replace(buf, 10, pair, right, 12, left, 12, MPI_COMM_WORLD, &two[0]));
    OK(MPI_Isendrecv_replace_c(buf + 40, 10, pair, right, 13, left, 13, MPI_COMM_WORLD, &two[1]));
    OK(MPI_Waitall(2, two, MPI_STATUSES_IGNORE));
    CHECK(two[0] == MPI_REQUEST_NULL && two[1] == MPI_REQUEST_NULL);
    /* Element k of the vector: ints 4k and 4k + 3 (extent 4). */
    for (int k = 0; k < 10; k++) {
        CHECK(buf[4 * k] == left * 1000 + 4 * k && buf[4 * k + 3] == left * 1000 + 4 * k + 3);
        CHECK(buf[4 * k + 1] == rank * 1000 + 4 * k + 1); /* the gaps stay */
        CHECK(buf[40 + 4 * k] == left * 1000 + 40 + 4 * k);
    }
    /* A receive that is cancelled: the request still completes. */
    OK(MPI_Isendrecv(out, 0, MPI_INT, MPI_PROC_NULL, 0, in, 1, MPI_INT, left, 99, MPI_COMM_WORLD, &r));
    OK(MPI_Cancel(&r));
    OK(MPI_Wait(&r, &st));
    int cancelled = 0;
    OK(MPI_Test_cancelled(&st, &cancelled));
    CHECK(cancelled && r == MPI_REQUEST_NULL);

    /* Elements: of the vector, of a received message, set by hand. */
    OK(MPI_Sendrecv(out, 7, MPI_INT, right, 14, in, N, MPI_INT, left, 14, MPI_COMM_WORLD, &st));
    int e = -1;
    MPI_Count ec = -1;
    OK(MPI_Get_elements(&st, MPI_INT, &e));
    CHECK(e == 7);
    OK(MPI_Get_elements(&st, pair, &e));
    CHECK(e == 7); /* basic elements: 3 whole pairs and one int */
    OK(MPI_Get_count(&st, pair, &e));
    CHECK(e == MPI_UNDEFINED);
    OK(MPI_Get_elements_c(&st, MPI_DOUBLE, &ec));
    CHECK(ec == MPI_UNDEFINED); /* 28 bytes are no whole doubles */
    OK(MPI_Get_elements_x(&st, MPI_SHORT, &ec));
    CHECK(ec == 14);
    MPI_Status made;
    memset(&made, 0, sizeof made);
    OK(MPI_Status_set_elements(&made, MPI_DOUBLE, 5));
    OK(MPI_Get_count(&made, MPI_DOUBLE, &e));
    CHECK(e == 5);
    OK(MPI_Status_set_elements_c(&made, MPI_INT, (MPI_Count)3 << 31));
    OK(MPI_Get_elements_c(&made, MPI_INT, &ec));
    CHECK(ec == (MPI_Count)3 << 31);
    OK(MPI_Get_elements(&made, MPI_INT, &e));
    CHECK(e == MPI_UNDEFINED); /* does not fit an int */
    OK(MPI_Status_set_elements_x(&made, pair, 6));
    OK(MPI_Get_count(&made, pair, &e));
    CHECK(e == 3);
    OK(MPI_Status_set_cancelled(&made, 1));
    OK(MPI_Test_cancelled(&made, &cancelled));
    CHECK(cancelled);

    /* Errors. */
    OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    OK(MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN));
    FAILS(MPI_ERR_COUNT, MPI_Send_c(out, -1, MPI_INT, right, 0, MPI_COMM_WORLD));
    FAILS(MPI_ERR_COUNT, MPI_Recv_c(in, -2, MPI_INT, left, 0, MPI_COMM_WORLD, &st));
    FAILS(MPI_ERR_COUNT, MPI_Isend_c(out, INT64_MAX, MPI_INT, right, 0, MPI_COMM_WORLD, &r));
    FAILS(MPI_ERR_RANK, MPI_Ssend_c(out, 1, MPI_INT, size, 0, MPI_COMM_WORLD));
    FAILS(MPI_ERR_TAG, MPI_Isendrecv(out, 1, MPI_INT, right, -7, in, 1, MPI_INT, left, 0, MPI_COMM_WORLD, &r));
    FAILS(MPI_ERR_RANK, MPI_Isendrecv(out, 1, MPI_INT, right, 0, in, 1, MPI_INT, size + 3, 0, MPI_COMM_WORLD, &r));
    FAILS(MPI_ERR_TYPE, MPI_Isendrecv_replace(buf, 1, MPI_DATATYPE_NULL, right, 0, left, 0, MPI_COMM_WORLD, &r));
    FAILS(MPI_ERR_ARG, MPI_Get_elements(MPI_STATUS_IGNORE, MPI_INT, &e));
    FAILS(MPI_ERR_COUNT, MPI_Status_set_elements(&made, MPI_INT, -1));
    MPI_Datatype mixed, types[2] = {MPI_INT, MPI_DOUBLE};
    int lens[2] = {1, 1};
    MPI_Aint disps[2] = {0, 8};
    OK(MPI_Type_create_struct(2, lens, disps, types, &mixed));
    OK(MPI_Type_commit(&mixed));
    FAILS(MPI_ERR_TYPE, MPI_Get_elements(&st, mixed, &e));
    OK(MPI_Type_free(&mixed));
    /* Not a persistent request. */
    OK(MPI_Isendrecv(out, 1, MPI_INT, right, 16, in, 1, MPI_INT, left, 16, MPI_COMM_WORLD, &r));
    FAILS(MPI_ERR_REQUEST, MPI_Start(&r));
    OK(MPI_Wait(&r, MPI_STATUS_IGNORE));
    /* A truncated receive through MPI_Isendrecv: its error. */
    OK(MPI_Isendrecv(out, 4, MPI_INT, right, 15, in, 2, MPI_INT, left, 15, MPI_COMM_WORLD, &r));
    FAILS(MPI_ERR_TRUNCATE, MPI_Wait(&r, &st));
    OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL));
    OK(MPI_Type_free(&pair));

    /* One message of 2^31 + 8 bytes (rank 0 to rank 1), if both can
     * have the memory. */
    const MPI_Count big = ((MPI_Count)1 << 31) + 8;
    unsigned char *b = NULL;
    if (size >= 2 && rank < 2) b = malloc((size_t)big);
    int have = size >= 2 && (rank >= 2 || b != NULL), all = 0;
    OK(MPI_Allreduce(&have, &all, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD));
    if (all && rank == 0) {
        memset(b, 0x5a, (size_t)big);
        b[0] = 1;
        b[(MPI_Count)1 << 31] = 3;
        b[big - 1] = 2;
        OK(MPI_Send_c(b, big, MPI_BYTE, 1, 17, MPI_COMM_WORLD));
    } else if (all && rank == 1) {
        memset(b, 0, (size_t)big);
        OK(MPI_Recv_c(b, big, MPI_BYTE, 0, 17, MPI_COMM_WORLD, &st));
        OK(MPI_Get_count_c(&st, MPI_BYTE, &n));
        CHECK(n == big);
        OK(MPI_Get_elements_x(&st, MPI_BYTE, &ec));
        CHECK(ec == big);
        OK(MPI_Get_count(&st, MPI_BYTE, &e));
        CHECK(e == MPI_UNDEFINED);
        CHECK(b[0] == 1 && b[(MPI_Count)1 << 31] == 3 && b[big - 1] == 2);
        for (MPI_Count i = 1; i < big - 1; i += 4093)
            if (i != (MPI_Count)1 << 31) CHECK(b[i] == 0x5a);
    }
    if (rank == 1 && size >= 2) printf("rank 1: a message of %lld bytes %s\n", (long long)big, all ? "received" : "skipped (no memory)");
    free(b);
    OK(MPI_Barrier(MPI_COMM_WORLD));
    PASSED("p2p_c");
    OK(MPI_Finalize());
    return 0;
}
