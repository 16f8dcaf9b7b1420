/* The collectives from C: every blocking routine, the nonblocking and
 * persistent forms, MPI_IN_PLACE, a derived datatype, a split
 * communicator, mixed request arrays, and bad arguments. Results are
 * checked against serial computations. */
#include "check.h"
#include <string.h>

static int me, n;

/* Element i of rank r's contribution (sums of these are exact). */
static double v(int r, int i) { return (double)((r * 131 + i * 7) % 97) + r * 0.5; }

static void blocking(MPI_Comm comm, int count) {
    int cme, cn;
    MPI_Comm_rank(comm, &cme);
    MPI_Comm_size(comm, &cn);
    double *s = malloc(sizeof(double) * (count + 1));
    double *r = malloc(sizeof(double) * (count + 1));
    double *all = malloc(sizeof(double) * (count + 1) * cn);
    for (int i = 0; i < count; i++) s[i] = v(cme, i);

    OK(MPI_Allreduce(s, r, count, MPI_DOUBLE, MPI_SUM, comm));
    for (int i = 0; i < count; i++) {
        double acc = v(cn - 1, i);
        for (int k = cn - 2; k >= 0; k--) acc = v(k, i) + acc;
        CHECK(r[i] == acc);
    }
    /* in place */
    memcpy(r, s, sizeof(double) * count);
    OK(MPI_Allreduce(MPI_IN_PLACE, r, count, MPI_DOUBLE, MPI_MAX, comm));
    for (int i = 0; i < count; i++) {
        double m = v(0, i);
        for (int k = 1; k < cn; k++) m = v(k, i) > m ? v(k, i) : m;
        CHECK(r[i] == m);
    }
    for (int root = 0; root < cn; root++) {
        /* reduce, with the root in place every other time */
        if (cme == root && root % 2 == 1) {
            memcpy(r, s, sizeof(double) * count);
            OK(MPI_Reduce(MPI_IN_PLACE, r, count, MPI_DOUBLE, MPI_MIN, root, comm));
        } else {
            OK(MPI_Reduce(s, r, count, MPI_DOUBLE, MPI_MIN, root, comm));
        }
        if (cme == root)
            for (int i = 0; i < count; i++) {
                double m = v(0, i);
                for (int k = 1; k < cn; k++) m = v(k, i) < m ? v(k, i) : m;
                CHECK(r[i] == m);
            }
        /* bcast */
        for (int i = 0; i < count; i++) r[i] = cme == root ? v(root, i) : -1;
        OK(MPI_Bcast(r, count, MPI_DOUBLE, root, comm));
        for (int i = 0; i < count; i++) CHECK(r[i] == v(root, i));
        /* gather and scatter */
        OK(MPI_Gather(s, count, MPI_DOUBLE, all, count, MPI_DOUBLE, root, comm));
        if (cme == root)
            for (int k = 0; k < cn; k++)
                for (int i = 0; i < count; i++) CHECK(all[k * count + i] == v(k, i));
        for (int k = 0; k < cn * count; k++) all[k] = cme == root ? k : -1;
        OK(MPI_Scatter(all, count, MPI_DOUBLE, r, count, MPI_DOUBLE, root, comm));
        for (int i = 0; i < count; i++) CHECK(r[i] == cme * count + i);
    }
    /* allgather, in place too */
    OK(MPI_Allgather(s, count, MPI_DOUBLE, all, count, MPI_DOUBLE, comm));
    for (int k = 0; k < cn; k++)
        for (int i = 0; i < count; i++) CHECK(all[k * count + i] == v(k, i));
    memset(all, 0, sizeof(double) * count * cn);
    memcpy(all + cme * count, s, sizeof(double) * count);
    OK(MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, all, count, MPI_DOUBLE, comm));
    for (int k = 0; k < cn; k++)
        for (int i = 0; i < count; i++) CHECK(all[k * count + i] == v(k, i));
    /* alltoall */
    double *src = malloc(sizeof(double) * (count + 1) * cn);
    for (int k = 0; k < cn * count; k++) src[k] = cme * 100000 + k;
    OK(MPI_Alltoall(src, count, MPI_DOUBLE, all, count, MPI_DOUBLE, comm));
    for (int k = 0; k < cn; k++)
        for (int i = 0; i < count; i++) CHECK(all[k * count + i] == k * 100000 + cme * count + i);
    /* scan, exscan, reduce_scatter_block */
    OK(MPI_Scan(s, r, count, MPI_DOUBLE, MPI_SUM, comm));
    for (int i = 0; i < count; i++) {
        double acc = v(cme, i);
        for (int k = cme - 1; k >= 0; k--) acc = v(k, i) + acc;
        CHECK(r[i] == acc);
    }
    for (int i = 0; i < count; i++) r[i] = -7;
    OK(MPI_Exscan(s, r, count, MPI_DOUBLE, MPI_SUM, comm));
    for (int i = 0; i < count; i++) {
        if (cme == 0) {
            CHECK(r[i] == -7);
        } else {
            double acc = v(cme - 1, i);
            for (int k = cme - 2; k >= 0; k--) acc = v(k, i) + acc;
            CHECK(r[i] == acc);
        }
    }
    for (int k = 0; k < cn * count; k++) src[k] = v(cme, k);
    OK(MPI_Reduce_scatter_block(src, r, count, MPI_DOUBLE, MPI_SUM, comm));
    for (int i = 0; i < count; i++) {
        int k = cme * count + i;
        double acc = v(cn - 1, k);
        for (int q = cn - 2; q >= 0; q--) acc = v(q, k) + acc;
        CHECK(r[i] == acc);
    }
    free(src);
    free(all);
    free(r);
    free(s);
}

static void varcount(MPI_Comm comm) {
    int cme, cn;
    MPI_Comm_rank(comm, &cme);
    MPI_Comm_size(comm, &cn);
    /* rank r contributes r + 1 ints */
    int *counts = malloc(sizeof(int) * cn), *displs = malloc(sizeof(int) * cn);
    int total = 0;
    for (int k = 0; k < cn; k++) {
        counts[k] = k + 1;
        displs[k] = total;
        total += k + 1;
    }
    int mine[64], all[4096], piece[64];
    for (int i = 0; i <= cme; i++) mine[i] = cme * 10 + i;
    OK(MPI_Allgatherv(mine, cme + 1, MPI_INT, all, counts, displs, MPI_INT, comm));
    for (int k = 0; k < cn; k++)
        for (int i = 0; i <= k; i++) CHECK(all[displs[k] + i] == k * 10 + i);
    for (int root = 0; root < cn; root++) {
        memset(all, 0, sizeof(all));
        OK(MPI_Gatherv(mine, cme + 1, MPI_INT, all, counts, displs, MPI_INT, root, comm));
        if (cme == root)
            for (int k = 0; k < cn; k++)
                for (int i = 0; i <= k; i++) CHECK(all[displs[k] + i] == k * 10 + i);
        OK(MPI_Scatterv(all, counts, displs, MPI_INT, piece, cme + 1, MPI_INT, root, comm));
        for (int i = 0; i <= cme; i++) CHECK(piece[i] == cme * 10 + i);
    }
    /* alltoallv: rank s sends s + 1 ints to each */
    int *sc = malloc(sizeof(int) * cn), *sd = malloc(sizeof(int) * cn);
    int *rc = malloc(sizeof(int) * cn), *rd = malloc(sizeof(int) * cn);
    for (int k = 0; k < cn; k++) {
        sc[k] = cme + 1;
        sd[k] = k * (cme + 1);
        rc[k] = k + 1;
        rd[k] = displs[k];
    }
    int src[4096];
    for (int k = 0; k < cn * (cme + 1); k++) src[k] = cme * 1000 + k;
    OK(MPI_Alltoallv(src, sc, sd, MPI_INT, all, rc, rd, MPI_INT, comm));
    for (int k = 0; k < cn; k++)
        for (int i = 0; i <= k; i++) CHECK(all[rd[k] + i] == k * 1000 + cme * (k + 1) + i);
    /* reduce_scatter with uneven blocks */
    int in[4096], outb[64];
    for (int k = 0; k < total; k++) in[k] = cme + k;
    OK(MPI_Reduce_scatter(in, outb, counts, MPI_INT, MPI_SUM, comm));
    for (int i = 0; i <= cme; i++) {
        int k = displs[cme] + i, acc = 0;
        for (int q = 0; q < cn; q++) acc += q + k;
        CHECK(outb[i] == acc);
    }
    free(sc); free(sd); free(rc); free(rd);
    free(counts);
    free(displs);
}

/* A vector of a struct through bcast and allreduce with MPI_MAXLOC pairs. */
static void derived(void) {
    MPI_Datatype col;
    OK(MPI_Type_vector(4, 1, 3, MPI_INT, &col));
    OK(MPI_Type_commit(&col));
    int m[12];
    for (int i = 0; i < 12; i++) m[i] = me == 0 ? i : -1;
    OK(MPI_Bcast(m, 1, col, 0, MPI_COMM_WORLD));
    for (int i = 0; i < 12; i++) CHECK(m[i] == (i % 3 == 0 ? i : (me == 0 ? i : -1)));
    int sum[12];
    for (int i = 0; i < 12; i++) sum[i] = -5;
    OK(MPI_Allreduce(m, sum, 1, col, MPI_SUM, MPI_COMM_WORLD));
    for (int i = 0; i < 12; i++) CHECK(sum[i] == (i % 3 == 0 ? n * i : -5));
    OK(MPI_Type_free(&col));
    struct { double v; int i; } p = { (double)(me % 2), me }, best;
    OK(MPI_Allreduce(&p, &best, 1, MPI_DOUBLE_INT, MPI_MAXLOC, MPI_COMM_WORLD));
    CHECK(best.v == (n > 1 ? 1.0 : 0.0) && best.i == (n > 1 ? 1 : 0));
}

static void nonblocking(void) {
    double s[1000], r[1000], b[40];
    for (int round = 0; round < 20; round++) {
        int count = round % 2 ? 1000 : 3;
        for (int i = 0; i < count; i++) s[i] = v(me, i + round);
        for (int i = 0; i < 40; i++) b[i] = me == round % n ? round * 100 + i : -1;
        MPI_Request q[4];
        OK(MPI_Iallreduce(s, r, count, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD, &q[0]));
        OK(MPI_Ibcast(b, 40, MPI_DOUBLE, round % n, MPI_COMM_WORLD, &q[1]));
        OK(MPI_Ibarrier(MPI_COMM_WORLD, &q[2]));
        /* point-to-point on the same communicator meanwhile */
        int tok = round, got = -1;
        OK(MPI_Irecv(&got, 1, MPI_INT, (me + n - 1) % n, 5, MPI_COMM_WORLD, &q[3]));
        OK(MPI_Send(&tok, 1, MPI_INT, (me + 1) % n, 5, MPI_COMM_WORLD));
        if (round % 3 == 0) {
            int idx, flag;
            OK(MPI_Waitany(4, q, &idx, MPI_STATUS_IGNORE));
            CHECK(idx >= 0 && idx < 4 && q[idx] == MPI_REQUEST_NULL);
            OK(MPI_Testall(4, q, &flag, MPI_STATUSES_IGNORE));
        }
        OK(MPI_Waitall(4, q, MPI_STATUSES_IGNORE));
        for (int i = 0; i < 4; i++) CHECK(q[i] == MPI_REQUEST_NULL);
        CHECK(got == round);
        for (int i = 0; i < count; i++) {
            double acc = v(n - 1, i + round);
            for (int k = n - 2; k >= 0; k--) acc = v(k, i + round) + acc;
            CHECK(r[i] == acc);
        }
        for (int i = 0; i < 40; i++) CHECK(b[i] == round * 100 + i);
    }
    /* MPI_Wait and MPI_Test on one request */
    MPI_Request q;
    double x = me, y = 0;
    OK(MPI_Iallreduce(&x, &y, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD, &q));
    int flag = 0;
    while (!flag) OK(MPI_Test(&q, &flag, MPI_STATUS_IGNORE));
    CHECK(q == MPI_REQUEST_NULL && y == n * (n - 1) / 2.0);
}

static void persistent(void) {
    double x, y;
    MPI_Request q[2];
    OK(MPI_Allreduce_init(&x, &y, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD, MPI_INFO_NULL, &q[0]));
    OK(MPI_Barrier_init(MPI_COMM_WORLD, MPI_INFO_NULL, &q[1]));
    for (int it = 0; it < 200; it++) {
        x = me + it;
        OK(MPI_Startall(2, q));
        OK(MPI_Waitall(2, q, MPI_STATUSES_IGNORE));
        CHECK(q[0] != MPI_REQUEST_NULL && q[1] != MPI_REQUEST_NULL);
        CHECK(y == n * (n - 1) / 2.0 + (double)n * it);
    }
    OK(MPI_Request_free(&q[0]));
    OK(MPI_Request_free(&q[1]));
    CHECK(q[0] == MPI_REQUEST_NULL);
}

static void bad_arguments(void) {
    double x = 1, y;
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN);
    FAILS(MPI_ERR_ROOT, MPI_Bcast(&x, 1, MPI_DOUBLE, n, MPI_COMM_WORLD));
    FAILS(MPI_ERR_ROOT, MPI_Reduce(&x, &y, 1, MPI_DOUBLE, MPI_SUM, -1, MPI_COMM_WORLD));
    FAILS(MPI_ERR_OP, MPI_Allreduce(&x, &y, 1, MPI_DOUBLE, MPI_BAND, MPI_COMM_WORLD));
    FAILS(MPI_ERR_COUNT, MPI_Allreduce(&x, &y, -1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD));
    FAILS(MPI_ERR_COMM, MPI_Barrier(MPI_COMM_NULL));
    FAILS(MPI_ERR_TYPE, MPI_Bcast(&x, 1, MPI_DATATYPE_NULL, 0, MPI_COMM_WORLD));
    FAILS(MPI_ERR_ARG, MPI_Ibarrier(MPI_COMM_WORLD, NULL));
    MPI_Request q;
    OK(MPI_Ibarrier(MPI_COMM_WORLD, &q));
    FAILS(MPI_ERR_REQUEST, MPI_Cancel(&q));
    FAILS(MPI_ERR_REQUEST, MPI_Start(&q));
    OK(MPI_Wait(&q, MPI_STATUS_IGNORE));
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
    MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_ARE_FATAL);
    OK(MPI_Barrier(MPI_COMM_WORLD));
}

int main(int argc, char **argv) {
    OK(MPI_Init(&argc, &argv));
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    check_rank = me;
    int counts[] = {0, 1, 7, 124, 1000, 131072};
    for (unsigned c = 0; c < sizeof(counts) / sizeof(counts[0]); c++) blocking(MPI_COMM_WORLD, counts[c]);
    MPI_Comm half;
    OK(MPI_Comm_split(MPI_COMM_WORLD, me % 2, -me, &half));
    blocking(half, 5);
    blocking(half, 5000);
    varcount(MPI_COMM_WORLD);
    varcount(half);
    OK(MPI_Comm_free(&half));
    derived();
    nonblocking();
    persistent();
    bad_arguments();
    PASSED("collectives");
    return MPI_Finalize();
}
