/* Wildcard receives and statuses, probes and matched probes, and the
 * request routines (wait/test and their all/any/some forms, cancel, free,
 * get_status) on 4 ranks. */
#include "check.h"
#include <string.h>

static int size;

static void any_source_any_tag(void) {
    if (check_rank == 0) {
        int seen[64] = {0};
        for (int k = 1; k < size; k++) {
            long v[3];
            MPI_Status st;
            int n;
            OK(MPI_Recv(v, 3, MPI_LONG, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &st));
            int r = st.MPI_SOURCE;
            CHECK(r > 0 && r < size && !seen[r]);
            seen[r] = 1;
            CHECK(st.MPI_TAG == 100 + r);
            OK(MPI_Get_count(&st, MPI_LONG, &n));
            CHECK(n == 3 && v[0] == r && v[1] == 10 * r && v[2] == -1);
        }
    } else {
        long v[3] = {check_rank, 10 * check_rank, -1};
        OK(MPI_Send(v, 3, MPI_LONG, 0, 100 + check_rank, MPI_COMM_WORLD));
    }
    OK(MPI_Barrier(MPI_COMM_WORLD));
}

static void probes(void) {
    if (check_rank == 1) {
        short s[5] = {1, 2, 3, 4, 5};
        OK(MPI_Send(s, 5, MPI_SHORT, 0, 8, MPI_COMM_WORLD));
        int i3[3] = {7, 8, 9};
        OK(MPI_Send(i3, 3, MPI_INT, 0, 9, MPI_COMM_WORLD));
        OK(MPI_Send(i3, 2, MPI_INT, 0, 10, MPI_COMM_WORLD));
        /* 10 bytes are not a whole number of ints. */
        OK(MPI_Send("0123456789", 10, MPI_CHAR, 0, 11, MPI_COMM_WORLD));
    } else if (check_rank == 0) {
        MPI_Status st;
        int n, flag;
        OK(MPI_Probe(MPI_ANY_SOURCE, 8, MPI_COMM_WORLD, &st));
        OK(MPI_Get_count(&st, MPI_SHORT, &n));
        CHECK(st.MPI_SOURCE == 1 && st.MPI_TAG == 8 && n == 5);
        short s[5] = {0};
        OK(MPI_Recv(s, 5, MPI_SHORT, st.MPI_SOURCE, st.MPI_TAG, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        CHECK(s[0] == 1 && s[4] == 5);

        /* A matched probe takes the message: nobody else sees it. */
        MPI_Message msg;
        OK(MPI_Mprobe(1, 9, MPI_COMM_WORLD, &msg, &st));
        CHECK(msg != MPI_MESSAGE_NULL && st.MPI_TAG == 9);
        OK(MPI_Iprobe(1, 9, MPI_COMM_WORLD, &flag, MPI_STATUS_IGNORE));
        CHECK(!flag);
        int i3[3] = {0};
        OK(MPI_Mrecv(i3, 3, MPI_INT, &msg, &st));
        CHECK(msg == MPI_MESSAGE_NULL && i3[0] == 7 && i3[2] == 9);
        OK(MPI_Get_count(&st, MPI_INT, &n));
        CHECK(n == 3);

        /* Improbe until it comes, then Imrecv. */
        flag = 0;
        while (!flag) OK(MPI_Improbe(1, 10, MPI_COMM_WORLD, &flag, &msg, &st));
        MPI_Request r;
        int i2[2] = {0};
        OK(MPI_Imrecv(i2, 2, MPI_INT, &msg, &r));
        OK(MPI_Wait(&r, &st));
        CHECK(i2[0] == 7 && i2[1] == 8 && st.MPI_SOURCE == 1);

        /* MPI_Get_count: MPI_UNDEFINED for a partial element. */
        char c[12] = {0};
        OK(MPI_Recv(c, 12, MPI_CHAR, 1, 11, MPI_COMM_WORLD, &st));
        OK(MPI_Get_count(&st, MPI_CHAR, &n));
        CHECK(n == 10 && memcmp(c, "0123456789", 10) == 0);
        OK(MPI_Get_count(&st, MPI_INT, &n));
        CHECK(n == MPI_UNDEFINED);
    }
    /* Probes on MPI_PROC_NULL. */
    MPI_Status st;
    MPI_Message msg;
    OK(MPI_Probe(MPI_PROC_NULL, 0, MPI_COMM_WORLD, &st));
    CHECK(st.MPI_SOURCE == MPI_PROC_NULL && st.MPI_TAG == MPI_ANY_TAG);
    OK(MPI_Mprobe(MPI_PROC_NULL, 0, MPI_COMM_WORLD, &msg, &st));
    CHECK(msg == MPI_MESSAGE_NO_PROC);
    int x = 5;
    OK(MPI_Mrecv(&x, 1, MPI_INT, &msg, &st));
    CHECK(x == 5 && st.MPI_SOURCE == MPI_PROC_NULL && msg == MPI_MESSAGE_NULL);
    OK(MPI_Barrier(MPI_COMM_WORLD));
}

static void proc_null(void) {
    MPI_Status st;
    int n = -1, x = 42;
    OK(MPI_Send(&x, 1, MPI_INT, MPI_PROC_NULL, 0, MPI_COMM_WORLD));
    OK(MPI_Recv(&x, 1, MPI_INT, MPI_PROC_NULL, 0, MPI_COMM_WORLD, &st));
    OK(MPI_Get_count(&st, MPI_INT, &n));
    CHECK(x == 42 && n == 0 && st.MPI_SOURCE == MPI_PROC_NULL && st.MPI_TAG == MPI_ANY_TAG);
    MPI_Request r;
    OK(MPI_Irecv(&x, 1, MPI_INT, MPI_PROC_NULL, 0, MPI_COMM_WORLD, &r));
    OK(MPI_Wait(&r, &st));
    CHECK(st.MPI_SOURCE == MPI_PROC_NULL && x == 42);
    /* No data to or from MPI_PROC_NULL: MPI_DATATYPE_NULL is never used. */
    OK(MPI_Send(NULL, 0, MPI_DATATYPE_NULL, MPI_PROC_NULL, 0, MPI_COMM_WORLD));
    OK(MPI_Ssend(NULL, 0, MPI_DATATYPE_NULL, MPI_PROC_NULL, 0, MPI_COMM_WORLD));
    OK(MPI_Recv(NULL, 0, MPI_DATATYPE_NULL, MPI_PROC_NULL, 0, MPI_COMM_WORLD, &st));
    CHECK(st.MPI_SOURCE == MPI_PROC_NULL && st.MPI_TAG == MPI_ANY_TAG);
    OK(MPI_Isend(NULL, 0, MPI_DATATYPE_NULL, MPI_PROC_NULL, 0, MPI_COMM_WORLD, &r));
    OK(MPI_Wait(&r, MPI_STATUS_IGNORE));
    OK(MPI_Irecv(NULL, 0, MPI_DATATYPE_NULL, MPI_PROC_NULL, 0, MPI_COMM_WORLD, &r));
    OK(MPI_Wait(&r, &st));
    CHECK(st.MPI_SOURCE == MPI_PROC_NULL);
    /* MPI_Request_get_status of MPI_REQUEST_NULL: done, an empty status. */
    int flag = 0;
    st.MPI_SOURCE = st.MPI_TAG = st.MPI_ERROR = 77;
    OK(MPI_Request_get_status(MPI_REQUEST_NULL, &flag, &st));
    OK(MPI_Get_count(&st, MPI_INT, &n));
    CHECK(flag && st.MPI_SOURCE == MPI_ANY_SOURCE && st.MPI_TAG == MPI_ANY_TAG);
    CHECK(st.MPI_ERROR == MPI_SUCCESS && n == 0);
    /* So does completing it. */
    r = MPI_REQUEST_NULL;
    st.MPI_SOURCE = st.MPI_TAG = 77;
    OK(MPI_Wait(&r, &st));
    CHECK(st.MPI_SOURCE == MPI_ANY_SOURCE && st.MPI_TAG == MPI_ANY_TAG);
}

static void request_sets(void) {
    enum { N = 8 };
    MPI_Request r[N];
    MPI_Status st[N];
    int idx[N], out, flag;
    if (check_rank == 0) {
        /* Receives from every other rank with two tags each. */
        int got[N] = {0};
        int n = 0;
        for (int src = 1; src < size; src++)
            for (int t = 0; t < 2; t++, n++) OK(MPI_Irecv(&got[n], 1, MPI_INT, src, t, MPI_COMM_WORLD, &r[n]));
        OK(MPI_Barrier(MPI_COMM_WORLD)); /* the senders start now */
        int done = 0, seen[N] = {0};
        /* Waitany until half are done, then Waitsome, then Testall. */
        while (done < n / 2) {
            int i;
            OK(MPI_Waitany(n, r, &i, &st[0]));
            CHECK(i >= 0 && i < n && !seen[i] && r[i] == MPI_REQUEST_NULL);
            CHECK(st[0].MPI_SOURCE == 1 + i / 2 && st[0].MPI_TAG == i % 2);
            seen[i] = 1;
            done++;
        }
        while (done < n - 1) {
            OK(MPI_Waitsome(n, r, &out, idx, st));
            CHECK(out >= 1);
            for (int k = 0; k < out; k++) {
                CHECK(!seen[idx[k]] && r[idx[k]] == MPI_REQUEST_NULL);
                CHECK(st[k].MPI_SOURCE == 1 + idx[k] / 2);
                seen[idx[k]] = 1;
            }
            done += out;
        }
        flag = 0;
        while (!flag) OK(MPI_Testall(n, r, &flag, st));
        for (int i = 0; i < n; i++) CHECK(r[i] == MPI_REQUEST_NULL && got[i] == 1000 * (1 + i / 2) + i % 2);
        /* Every entry null: Waitany says MPI_UNDEFINED, Waitsome too. */
        int i;
        OK(MPI_Waitany(n, r, &i, &st[0]));
        CHECK(i == MPI_UNDEFINED);
        OK(MPI_Waitsome(n, r, &out, idx, st));
        CHECK(out == MPI_UNDEFINED);
        OK(MPI_Testany(n, r, &i, &flag, &st[0]));
        CHECK(flag && i == MPI_UNDEFINED);
        OK(MPI_Waitall(0, NULL, NULL));
    } else {
        OK(MPI_Barrier(MPI_COMM_WORLD));
        int v[2] = {1000 * check_rank, 1000 * check_rank + 1};
        OK(MPI_Isend(&v[1], 1, MPI_INT, 0, 1, MPI_COMM_WORLD, &r[1]));
        OK(MPI_Isend(&v[0], 1, MPI_INT, 0, 0, MPI_COMM_WORLD, &r[0]));
        OK(MPI_Waitall(2, r, MPI_STATUSES_IGNORE));
        CHECK(r[0] == MPI_REQUEST_NULL && r[1] == MPI_REQUEST_NULL);
    }
    OK(MPI_Barrier(MPI_COMM_WORLD));

    /* Testany / Testsome between ranks 0 and 1. */
    if (check_rank < 2) {
        int peer = 1 - check_rank, a = check_rank, b = -1, c = -1;
        OK(MPI_Irecv(&b, 1, MPI_INT, peer, 20, MPI_COMM_WORLD, &r[0]));
        OK(MPI_Irecv(&c, 1, MPI_INT, peer, 21, MPI_COMM_WORLD, &r[1]));
        OK(MPI_Send(&a, 1, MPI_INT, peer, 21, MPI_COMM_WORLD));
        int i = -1;
        flag = 0;
        while (!flag) OK(MPI_Testany(2, r, &i, &flag, &st[0]));
        /* Message order per tag: tag 21 arrived; tag 20 is not sent yet. */
        CHECK(i == 1 && c == peer && st[0].MPI_TAG == 21 && r[1] == MPI_REQUEST_NULL);
        OK(MPI_Testsome(2, r, &out, idx, st));
        CHECK(out == 0 && r[0] != MPI_REQUEST_NULL);
        /* Request_get_status does not free. */
        OK(MPI_Request_get_status(r[0], &flag, &st[0]));
        CHECK(!flag);
        OK(MPI_Barrier(MPI_COMM_WORLD));
        OK(MPI_Send(&a, 1, MPI_INT, peer, 20, MPI_COMM_WORLD));
        flag = 0;
        while (!flag) OK(MPI_Request_get_status(r[0], &flag, &st[0]));
        CHECK(r[0] != MPI_REQUEST_NULL && b == peer && st[0].MPI_TAG == 20);
        out = 0;
        while (out == 0) OK(MPI_Testsome(2, r, &out, idx, st));
        CHECK(out == 1 && idx[0] == 0 && r[0] == MPI_REQUEST_NULL);
    } else {
        OK(MPI_Barrier(MPI_COMM_WORLD));
    }
    OK(MPI_Barrier(MPI_COMM_WORLD));
}

static void cancel_and_free(void) {
    MPI_Request r;
    MPI_Status st;
    int flag, x = -1;
    /* A receive nobody matches can be cancelled. */
    OK(MPI_Irecv(&x, 1, MPI_INT, MPI_ANY_SOURCE, 777, MPI_COMM_WORLD, &r));
    OK(MPI_Cancel(&r));
    OK(MPI_Wait(&r, &st));
    OK(MPI_Test_cancelled(&st, &flag));
    CHECK(flag && x == -1 && r == MPI_REQUEST_NULL);
    /* A completed receive is not cancelled. */
    OK(MPI_Irecv(&x, 1, MPI_INT, check_rank, 5, MPI_COMM_WORLD, &r));
    int me = check_rank;
    OK(MPI_Send(&me, 1, MPI_INT, check_rank, 5, MPI_COMM_WORLD));
    OK(MPI_Wait(&r, &st));
    OK(MPI_Test_cancelled(&st, &flag));
    CHECK(!flag && x == check_rank);

    /* A send freed while pending still arrives. */
    int n = 1 << 20;
    int *big = malloc((size_t)n * sizeof(int));
    if (check_rank == 0) {
        for (int i = 0; i < n; i++) big[i] = i ^ 0x5a5a;
        OK(MPI_Isend(big, n, MPI_INT, 1, 30, MPI_COMM_WORLD, &r));
        OK(MPI_Request_free(&r));
        CHECK(r == MPI_REQUEST_NULL);
    } else if (check_rank == 1) {
        OK(MPI_Recv(big, n, MPI_INT, 0, 30, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        for (int i = 0; i < n; i++) CHECK(big[i] == (i ^ 0x5a5a));
    }
    OK(MPI_Barrier(MPI_COMM_WORLD));
    free(big);
}

/* Small sends finish as they start and share one handle (not a table
 * entry); every completion routine takes them, alone and mixed with
 * pending receives, and sets them to MPI_REQUEST_NULL. */
static void finished_sends(void) {
    MPI_Request r[4];
    MPI_Status st[4];
    int flag, i, out, idx[4], x = -1, y = -1, v[4] = {1, 2, 3, 4};
    int peer = check_rank ^ 1;
    if (peer >= size) {
        OK(MPI_Barrier(MPI_COMM_WORLD));
        return;
    }
    OK(MPI_Isend(&v[0], 1, MPI_INT, peer, 60, MPI_COMM_WORLD, &r[0]));
    OK(MPI_Isend(&v[1], 1, MPI_INT, peer, 61, MPI_COMM_WORLD, &r[1]));
    CHECK(r[0] != MPI_REQUEST_NULL && r[1] != MPI_REQUEST_NULL);
    OK(MPI_Request_get_status(r[0], &flag, &st[0]));
    CHECK(flag && r[0] != MPI_REQUEST_NULL && st[0].MPI_ERROR == MPI_SUCCESS);
    OK(MPI_Test_cancelled(&st[0], &flag));
    CHECK(!flag);
    OK(MPI_Cancel(&r[0])); /* a send is not cancelled: it still completes */
    OK(MPI_Wait(&r[0], &st[0]));
    OK(MPI_Test_cancelled(&st[0], &flag));
    CHECK(!flag && r[0] == MPI_REQUEST_NULL);
    flag = 0;
    OK(MPI_Test(&r[1], &flag, MPI_STATUS_IGNORE));
    CHECK(flag && r[1] == MPI_REQUEST_NULL);
    OK(MPI_Recv(&x, 1, MPI_INT, peer, 60, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
    OK(MPI_Recv(&y, 1, MPI_INT, peer, 61, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
    CHECK(x == 1 && y == 2);

    /* Mixed with a receive that cannot finish yet (the peer sends it
     * later): Waitany and Testany
     * give the send, Testall changes nothing, Waitsome gives the send. */
    OK(MPI_Irecv(&x, 1, MPI_INT, peer, 62, MPI_COMM_WORLD, &r[0]));
    OK(MPI_Isend(&v[2], 1, MPI_INT, peer, 63, MPI_COMM_WORLD, &r[1]));
    OK(MPI_Isend(&v[3], 1, MPI_INT, peer, 64, MPI_COMM_WORLD, &r[2]));
    OK(MPI_Isend(&v[0], 1, MPI_INT, peer, 65, MPI_COMM_WORLD, &r[3]));
    MPI_Request sent = r[1];
    OK(MPI_Testall(4, r, &flag, MPI_STATUSES_IGNORE));
    CHECK(!flag && r[1] == sent && r[2] == sent && r[0] != MPI_REQUEST_NULL);
    OK(MPI_Waitany(4, r, &i, &st[0]));
    CHECK(i >= 1 && r[i] == MPI_REQUEST_NULL);
    flag = 0;
    OK(MPI_Testany(4, r, &i, &flag, &st[0]));
    CHECK(flag && i >= 1 && r[i] == MPI_REQUEST_NULL);
    OK(MPI_Waitsome(4, r, &out, idx, st));
    CHECK(out == 1 && idx[0] >= 1 && r[idx[0]] == MPI_REQUEST_NULL);
    CHECK(r[0] != MPI_REQUEST_NULL && r[1] == MPI_REQUEST_NULL && r[2] == MPI_REQUEST_NULL &&
          r[3] == MPI_REQUEST_NULL);
    /* Each side sends tag 62 only once the other is through the above.
     * Waitall then finishes a set of sends and that receive, with
     * statuses. */
    OK(MPI_Sendrecv(&v[0], 1, MPI_INT, peer, 68, &y, 1, MPI_INT, peer, 68, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
    OK(MPI_Isend(&v[1], 1, MPI_INT, peer, 62, MPI_COMM_WORLD, &r[1]));
    OK(MPI_Isend(&v[2], 1, MPI_INT, peer, 66, MPI_COMM_WORLD, &r[2]));
    r[3] = MPI_REQUEST_NULL;
    OK(MPI_Waitall(4, r, st));
    CHECK(x == 2 && st[0].MPI_SOURCE == peer && st[0].MPI_TAG == 62);
    for (int k = 0; k < 4; k++) CHECK(r[k] == MPI_REQUEST_NULL && st[k].MPI_ERROR == MPI_SUCCESS);
    for (int t = 63; t <= 66; t++) {
        OK(MPI_Recv(&y, 1, MPI_INT, peer, t, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        CHECK(y == (t == 63 ? 3 : t == 64 ? 4 : t == 65 ? 1 : 3));
    }
    /* Freeing one is completing it. */
    OK(MPI_Isend(&v[0], 1, MPI_INT, peer, 67, MPI_COMM_WORLD, &r[0]));
    OK(MPI_Request_free(&r[0]));
    CHECK(r[0] == MPI_REQUEST_NULL);
    OK(MPI_Recv(&y, 1, MPI_INT, peer, 67, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
    CHECK(y == 1);
    OK(MPI_Barrier(MPI_COMM_WORLD));
}

/* Checks a receive's status: sender, tag and a count of `n` ints. */
static void check_status(const MPI_Status *st, int source, int tag, int n) {
    int got;
    CHECK(st->MPI_SOURCE == source && st->MPI_TAG == tag && st->MPI_ERROR == MPI_SUCCESS);
    OK(MPI_Get_count(st, MPI_INT, &got));
    CHECK(got == n);
}

/* Receives that find their message already there finish as they are
 * posted (on MPI_COMM_WORLD their handle carries the status): every
 * completion routine takes them, alone and mixed with pending ones, with
 * the right status. A truncated one, one on MPI_COMM_SELF and one on a
 * communicator whose ranks differ from the world's report theirs too. */
static void finished_receives(void) {
    MPI_Request r[4];
    MPI_Status st[4];
    int flag, i, out, idx[4], x[2], y[2], z = -1;
    int peer = check_rank ^ 1;
    if (peer >= size) {
        OK(MPI_Barrier(MPI_COMM_WORLD));
        OK(MPI_Barrier(MPI_COMM_WORLD));
        MPI_Comm rev;
        OK(MPI_Comm_split(MPI_COMM_WORLD, 1, 0, &rev));
        OK(MPI_Comm_free(&rev));
        return;
    }
    for (int t = 70; t <= 77; t++) {
        int v[2] = {t, -t};
        OK(MPI_Send(v, t == 73 || t == 77 ? 2 : 1, MPI_INT, peer, t, MPI_COMM_WORLD));
    }
    for (int t = 81; t <= 82; t++) OK(MPI_Send(&t, 1, MPI_INT, peer, t, MPI_COMM_WORLD));
    OK(MPI_Barrier(MPI_COMM_WORLD)); /* everything has arrived */

    /* Waitall with statuses over receives that all finished as they were
     * posted, around a null handle: each receive's own status, and the
     * empty status for the null handle. */
    OK(MPI_Irecv(&x[0], 1, MPI_INT, peer, 81, MPI_COMM_WORLD, &r[0]));
    r[1] = MPI_REQUEST_NULL;
    OK(MPI_Irecv(&y[0], 1, MPI_INT, peer, 82, MPI_COMM_WORLD, &r[2]));
    st[1].MPI_SOURCE = st[1].MPI_TAG = 12345;
    OK(MPI_Waitall(3, r, st));
    CHECK(x[0] == 81 && y[0] == 82);
    check_status(&st[0], peer, 81, 1);
    check_status(&st[2], peer, 82, 1);
    CHECK(st[1].MPI_SOURCE == MPI_ANY_SOURCE && st[1].MPI_TAG == MPI_ANY_TAG);
    for (int k = 0; k < 3; k++) CHECK(r[k] == MPI_REQUEST_NULL);

    OK(MPI_Irecv(x, 1, MPI_INT, peer, 70, MPI_COMM_WORLD, &r[0]));
    CHECK(r[0] != MPI_REQUEST_NULL && x[0] == 70);
    OK(MPI_Request_get_status(r[0], &flag, &st[0]));
    CHECK(flag && r[0] != MPI_REQUEST_NULL);
    check_status(&st[0], peer, 70, 1);
    OK(MPI_Test_cancelled(&st[0], &flag));
    CHECK(!flag);
    OK(MPI_Cancel(&r[0])); /* too late: it finished */
    OK(MPI_Wait(&r[0], &st[0]));
    CHECK(r[0] == MPI_REQUEST_NULL);
    check_status(&st[0], peer, 70, 1);
    OK(MPI_Test_cancelled(&st[0], &flag));
    CHECK(!flag);

    flag = 0;
    OK(MPI_Irecv(x, 1, MPI_INT, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &r[0]));
    OK(MPI_Test(&r[0], &flag, &st[0]));
    CHECK(flag && r[0] == MPI_REQUEST_NULL && x[0] == 71);
    check_status(&st[0], peer, 71, 1);

    /* Waitall with statuses over two finished receives, one that waits
     * (tag 79, which the peer sends just before its own Waitall) and a
     * null handle. */
    OK(MPI_Irecv(x, 1, MPI_INT, peer, 72, MPI_COMM_WORLD, &r[0]));
    OK(MPI_Irecv(y, 2, MPI_INT, peer, 73, MPI_COMM_WORLD, &r[1]));
    OK(MPI_Irecv(&z, 1, MPI_INT, peer, 79, MPI_COMM_WORLD, &r[2]));
    r[3] = MPI_REQUEST_NULL;
    OK(MPI_Send(&peer, 1, MPI_INT, peer, 79, MPI_COMM_WORLD));
    OK(MPI_Waitall(4, r, st));
    CHECK(x[0] == 72 && y[0] == 73 && y[1] == -73 && z == check_rank);
    check_status(&st[0], peer, 72, 1);
    check_status(&st[1], peer, 73, 2);
    check_status(&st[2], peer, 79, 1);
    for (int k = 0; k < 4; k++) CHECK(r[k] == MPI_REQUEST_NULL);

    /* Any and some: a finished receive beside one that waits (tag 80 comes
     * only after the barrier). */
    OK(MPI_Irecv(&z, 1, MPI_INT, peer, 80, MPI_COMM_WORLD, &r[0]));
    OK(MPI_Irecv(x, 1, MPI_INT, peer, 74, MPI_COMM_WORLD, &r[1]));
    OK(MPI_Irecv(y, 1, MPI_INT, peer, 75, MPI_COMM_WORLD, &r[2]));
    OK(MPI_Waitany(3, r, &i, &st[0]));
    flag = 0;
    OK(MPI_Testany(3, r, &out, &flag, &st[1]));
    CHECK(flag && i + out == 3 && (i == 1 || i == 2));
    CHECK(r[1] == MPI_REQUEST_NULL && r[2] == MPI_REQUEST_NULL && x[0] == 74 && y[0] == 75);
    check_status(&st[0], peer, 73 + i, 1);
    check_status(&st[1], peer, 73 + out, 1);
    OK(MPI_Irecv(x, 1, MPI_INT, peer, 76, MPI_COMM_WORLD, &r[1]));
    OK(MPI_Waitsome(3, r, &out, idx, st));
    CHECK(out == 1 && idx[0] == 1 && r[1] == MPI_REQUEST_NULL && x[0] == 76);
    check_status(&st[0], peer, 76, 1);
    OK(MPI_Barrier(MPI_COMM_WORLD));
    OK(MPI_Send(&peer, 1, MPI_INT, peer, 80, MPI_COMM_WORLD));
    OK(MPI_Wait(&r[0], &st[0]));
    check_status(&st[0], peer, 80, 1);

    /* Truncated: an error in its status, reported by the wait. */
    OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    OK(MPI_Irecv(x, 1, MPI_INT, peer, 77, MPI_COMM_WORLD, &r[0]));
    CHECK(MPI_Wait(&r[0], &st[0]) == MPI_ERR_TRUNCATE);
    CHECK(r[0] == MPI_REQUEST_NULL && x[0] == 77 && st[0].MPI_ERROR == MPI_ERR_TRUNCATE);
    OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL));

    /* MPI_COMM_SELF: the sender is rank 0 there, whatever its world rank. */
    OK(MPI_Send(&peer, 1, MPI_INT, 0, 5, MPI_COMM_SELF));
    OK(MPI_Irecv(x, 1, MPI_INT, 0, 5, MPI_COMM_SELF, &r[0]));
    OK(MPI_Wait(&r[0], &st[0]));
    CHECK(x[0] == peer);
    check_status(&st[0], 0, 5, 1);

    /* Ranks in reverse order: the status names the sender's rank there. */
    MPI_Comm rev;
    int rrank, rpeer;
    OK(MPI_Comm_split(MPI_COMM_WORLD, 0, size - check_rank, &rev));
    OK(MPI_Comm_rank(rev, &rrank));
    CHECK(rrank == size - 1 - check_rank);
    rpeer = size - 1 - peer;
    OK(MPI_Send(&rrank, 1, MPI_INT, rpeer, 6, rev));
    OK(MPI_Probe(rpeer, 6, rev, &st[0])); /* it has arrived */
    OK(MPI_Irecv(x, 1, MPI_INT, rpeer, 6, rev, &r[0]));
    OK(MPI_Waitall(1, r, st));
    CHECK(x[0] == rpeer);
    check_status(&st[0], rpeer, 6, 1);
    OK(MPI_Comm_free(&rev));
}

int main(int argc, char **argv) {
    OK(MPI_Init(&argc, &argv));
    OK(MPI_Comm_rank(MPI_COMM_WORLD, &check_rank));
    OK(MPI_Comm_size(MPI_COMM_WORLD, &size));
    CHECK(size >= 2 && size <= 4);
    any_source_any_tag();
    probes();
    proc_null();
    request_sets();
    cancel_and_free();
    finished_sends();
    finished_receives();
    OK(MPI_Finalize());
    PASSED("wildcards");
    return 0;
}
