/* The large-count collectives (MPI 4.0 `_c` forms, MPI_Count counts and
 * MPI_Aint displacements): every one blocking, nonblocking and persistent,
 * checked against serial computations; bad counts are errors; and, on 2
 * ranks, counts and displacements past INT_MAX: a bcast of 2^31 + 8
 * bytes, then pieces gathered and scattered at displacements above 2^31
 * (skipped with HMPI_TEST_NO_BIG set, for machines without 5 GiB of
 * shared memory to spare). */
#include "check.h"
#include <limits.h>
#include <stdint.h>
#include <string.h>

static int me, n;

/* Runs one collective in mode 0 (blocking), 1 (nonblocking, waited for)
 * or 2 (persistent: initialised, started, waited for, freed). */
#define RUN(mode, blk, nb, init, ...)                                         \
    do {                                                                      \
        MPI_Request req_ = MPI_REQUEST_NULL;                                  \
        if ((mode) == 0) {                                                    \
            OK(blk(__VA_ARGS__));                                             \
        } else if ((mode) == 1) {                                             \
            OK(nb(__VA_ARGS__, &req_));                                       \
            OK(MPI_Wait(&req_, MPI_STATUS_IGNORE));                           \
            CHECK(req_ == MPI_REQUEST_NULL);                                  \
        } else {                                                              \
            OK(init(__VA_ARGS__, MPI_INFO_NULL, &req_));                      \
            OK(MPI_Start(&req_));                                             \
            OK(MPI_Wait(&req_, MPI_STATUS_IGNORE));                           \
            OK(MPI_Request_free(&req_));                                      \
        }                                                                     \
    } while (0)

/* Element i of rank r's contribution. */
static long long val(int r, MPI_Count i) { return (long long)r * 1000003 + (long long)i * 7 + 1; }

static void rooted_and_reductions(int mode, MPI_Count count) {
    long long *s = malloc(sizeof(long long) * (size_t)(count + 1));
    long long *r = malloc(sizeof(long long) * (size_t)(count + 1));
    long long *all = malloc(sizeof(long long) * (size_t)(count + 1) * n);
    for (MPI_Count i = 0; i < count; i++) s[i] = val(me, i);

    for (int root = 0; root < n; root++) {
        for (MPI_Count i = 0; i < count; i++) r[i] = me == root ? val(root, i) : -1;
        RUN(mode, MPI_Bcast_c, MPI_Ibcast_c, MPI_Bcast_init_c, r, count, MPI_LONG_LONG, root,
            MPI_COMM_WORLD);
        for (MPI_Count i = 0; i < count; i++) CHECK(r[i] == val(root, i));

        for (MPI_Count i = 0; i < count; i++) r[i] = -1;
        RUN(mode, MPI_Reduce_c, MPI_Ireduce_c, MPI_Reduce_init_c, s, r, count, MPI_LONG_LONG,
            MPI_SUM, root, MPI_COMM_WORLD);
        if (me == root)
            for (MPI_Count i = 0; i < count; i++) {
                long long acc = 0;
                for (int k = 0; k < n; k++) acc += val(k, i);
                CHECK(r[i] == acc);
            }

        RUN(mode, MPI_Gather_c, MPI_Igather_c, MPI_Gather_init_c, s, count, MPI_LONG_LONG, all,
            count, MPI_LONG_LONG, root, MPI_COMM_WORLD);
        if (me == root)
            for (int k = 0; k < n; k++)
                for (MPI_Count i = 0; i < count; i++) CHECK(all[k * count + i] == val(k, i));

        for (MPI_Count k = 0; k < n * count; k++) all[k] = me == root ? k : -1;
        RUN(mode, MPI_Scatter_c, MPI_Iscatter_c, MPI_Scatter_init_c, all, count, MPI_LONG_LONG, r,
            count, MPI_LONG_LONG, root, MPI_COMM_WORLD);
        for (MPI_Count i = 0; i < count; i++) CHECK(r[i] == me * count + i);
    }

    RUN(mode, MPI_Allreduce_c, MPI_Iallreduce_c, MPI_Allreduce_init_c, s, r, count,
        MPI_LONG_LONG, MPI_MAX, MPI_COMM_WORLD);
    for (MPI_Count i = 0; i < count; i++) CHECK(r[i] == val(n - 1, i));

    RUN(mode, MPI_Scan_c, MPI_Iscan_c, MPI_Scan_init_c, s, r, count, MPI_LONG_LONG, MPI_SUM,
        MPI_COMM_WORLD);
    for (MPI_Count i = 0; i < count; i++) {
        long long acc = 0;
        for (int k = 0; k <= me; k++) acc += val(k, i);
        CHECK(r[i] == acc);
    }
    for (MPI_Count i = 0; i < count; i++) r[i] = -5;
    RUN(mode, MPI_Exscan_c, MPI_Iexscan_c, MPI_Exscan_init_c, s, r, count, MPI_LONG_LONG,
        MPI_SUM, MPI_COMM_WORLD);
    for (MPI_Count i = 0; i < count; i++) {
        long long acc = 0;
        for (int k = 0; k < me; k++) acc += val(k, i);
        CHECK(r[i] == (me == 0 ? -5 : acc));
    }

    RUN(mode, MPI_Allgather_c, MPI_Iallgather_c, MPI_Allgather_init_c, s, count, MPI_LONG_LONG,
        all, count, MPI_LONG_LONG, MPI_COMM_WORLD);
    for (int k = 0; k < n; k++)
        for (MPI_Count i = 0; i < count; i++) CHECK(all[k * count + i] == val(k, i));

    /* alltoall: block k of rank me's source goes to rank k */
    long long *src = malloc(sizeof(long long) * (size_t)(count + 1) * n);
    for (MPI_Count k = 0; k < n * count; k++) src[k] = me * 100000 + k;
    RUN(mode, MPI_Alltoall_c, MPI_Ialltoall_c, MPI_Alltoall_init_c, src, count, MPI_LONG_LONG,
        all, count, MPI_LONG_LONG, MPI_COMM_WORLD);
    for (int k = 0; k < n; k++)
        for (MPI_Count i = 0; i < count; i++) CHECK(all[k * count + i] == k * 100000 + me * count + i);

    /* reduce_scatter_block and reduce_scatter: block me of the sum */
    for (MPI_Count k = 0; k < n * count; k++) src[k] = val(me, k);
    RUN(mode, MPI_Reduce_scatter_block_c, MPI_Ireduce_scatter_block_c,
        MPI_Reduce_scatter_block_init_c, src, r, count, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
    for (MPI_Count i = 0; i < count; i++) {
        long long acc = 0;
        for (int k = 0; k < n; k++) acc += val(k, me * count + i);
        CHECK(r[i] == acc);
    }
    MPI_Count *rc = malloc(sizeof(MPI_Count) * n);
    for (int k = 0; k < n; k++) rc[k] = count;
    RUN(mode, MPI_Reduce_scatter_c, MPI_Ireduce_scatter_c, MPI_Reduce_scatter_init_c, src, r, rc,
        MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
    for (MPI_Count i = 0; i < count; i++) {
        long long acc = 0;
        for (int k = 0; k < n; k++) acc += val(k, me * count + i);
        CHECK(r[i] == acc);
    }
    free(rc);
    free(src);
    free(all);
    free(r);
    free(s);
}

/* The v and w forms: rank k contributes k + 1 + extra elements; the pieces
 * lie in reverse rank order at the receiver, one element apart. */
static void varying(int mode, MPI_Count extra) {
    MPI_Count *cnt = malloc(sizeof(MPI_Count) * n);
    MPI_Aint *dis = malloc(sizeof(MPI_Aint) * n);
    MPI_Count total = 0;
    for (int k = n - 1; k >= 0; k--) {
        cnt[k] = k + 1 + extra;
        dis[k] = (MPI_Aint)total;
        total += cnt[k] + 1;
    }
    MPI_Count mine = me + 1 + extra;
    long long *s = malloc(sizeof(long long) * (size_t)mine);
    long long *buf = malloc(sizeof(long long) * (size_t)total);
    for (MPI_Count i = 0; i < mine; i++) s[i] = val(me, i);

    for (int root = 0; root < n; root++) {
        for (MPI_Count i = 0; i < total; i++) buf[i] = -1;
        RUN(mode, MPI_Gatherv_c, MPI_Igatherv_c, MPI_Gatherv_init_c, s, mine, MPI_LONG_LONG, buf,
            cnt, dis, MPI_LONG_LONG, root, MPI_COMM_WORLD);
        if (me == root)
            for (int k = 0; k < n; k++) {
                for (MPI_Count i = 0; i < cnt[k]; i++) CHECK(buf[dis[k] + i] == val(k, i));
                CHECK(buf[dis[k] + cnt[k]] == -1);
            }
        for (MPI_Count i = 0; i < mine; i++) s[i] = -1;
        RUN(mode, MPI_Scatterv_c, MPI_Iscatterv_c, MPI_Scatterv_init_c, buf, cnt, dis,
            MPI_LONG_LONG, s, mine, MPI_LONG_LONG, root, MPI_COMM_WORLD);
        for (MPI_Count i = 0; i < mine; i++) CHECK(s[i] == val(me, i));
    }
    for (MPI_Count i = 0; i < total; i++) buf[i] = -1;
    RUN(mode, MPI_Allgatherv_c, MPI_Iallgatherv_c, MPI_Allgatherv_init_c, s, mine, MPI_LONG_LONG,
        buf, cnt, dis, MPI_LONG_LONG, MPI_COMM_WORLD);
    for (int k = 0; k < n; k++)
        for (MPI_Count i = 0; i < cnt[k]; i++) CHECK(buf[dis[k] + i] == val(k, i));

    /* alltoallv: rank me sends j + 1 + extra elements to rank j, from
     * reversed blocks; alltoallw: the same with byte displacements. */
    MPI_Count *sc = malloc(sizeof(MPI_Count) * n), *rcv = malloc(sizeof(MPI_Count) * n);
    MPI_Aint *sd = malloc(sizeof(MPI_Aint) * n), *rd = malloc(sizeof(MPI_Aint) * n);
    MPI_Aint *sdb = malloc(sizeof(MPI_Aint) * n), *rdb = malloc(sizeof(MPI_Aint) * n);
    MPI_Datatype *ty = malloc(sizeof(MPI_Datatype) * n);
    MPI_Count stot = 0, rtot = 0;
    for (int j = n - 1; j >= 0; j--) {
        sc[j] = j + 1 + extra;
        sd[j] = (MPI_Aint)stot;
        stot += sc[j];
    }
    for (int j = 0; j < n; j++) {
        rcv[j] = me + 1 + extra;
        rd[j] = (MPI_Aint)rtot;
        rtot += rcv[j];
        ty[j] = MPI_LONG_LONG;
        sdb[j] = sd[j] * (MPI_Aint)sizeof(long long);
        rdb[j] = rd[j] * (MPI_Aint)sizeof(long long);
    }
    long long *a = malloc(sizeof(long long) * (size_t)(stot + 1));
    long long *b = malloc(sizeof(long long) * (size_t)(rtot + 1));
    for (int j = 0; j < n; j++)
        for (MPI_Count i = 0; i < sc[j]; i++) a[sd[j] + i] = me * 100000 + j * 1000 + i;
    for (int w = 0; w < 2; w++) {
        for (MPI_Count i = 0; i < rtot; i++) b[i] = -1;
        if (w == 0)
            RUN(mode, MPI_Alltoallv_c, MPI_Ialltoallv_c, MPI_Alltoallv_init_c, a, sc, sd,
                MPI_LONG_LONG, b, rcv, rd, MPI_LONG_LONG, MPI_COMM_WORLD);
        else
            RUN(mode, MPI_Alltoallw_c, MPI_Ialltoallw_c, MPI_Alltoallw_init_c, a, sc, sdb, ty, b,
                rcv, rdb, ty, MPI_COMM_WORLD);
        for (int k = 0; k < n; k++)
            for (MPI_Count i = 0; i < rcv[k]; i++)
                CHECK(b[rd[k] + i] == k * 100000 + me * 1000 + i);
    }
    free(a);
    free(b);
    free(ty);
    free(sdb);
    free(rdb);
    free(sc);
    free(rcv);
    free(sd);
    free(rd);
    free(buf);
    free(s);
    free(dis);
    free(cnt);
}

/* Bad counts and displacements are errors, reported before any data
 * moves, never truncated to an int. */
static void bad_arguments(void) {
    char c = 0;
    FAILS(MPI_ERR_COUNT, MPI_Bcast_c(&c, -1, MPI_CHAR, 0, MPI_COMM_WORLD));
    FAILS(MPI_ERR_COUNT, MPI_Allreduce_c(&c, &c, -((MPI_Count)1 << 40), MPI_CHAR, MPI_MAX,
                                         MPI_COMM_WORLD));
    /* 2^61 doubles: more bytes than any address space */
    FAILS(MPI_ERR_COUNT, MPI_Bcast_c(&c, (MPI_Count)1 << 61, MPI_DOUBLE, 0, MPI_COMM_WORLD));
    MPI_Count *cnt = malloc(sizeof(MPI_Count) * n);
    MPI_Aint *dis = malloc(sizeof(MPI_Aint) * n);
    for (int k = 0; k < n; k++) {
        cnt[k] = 0;
        dis[k] = 0;
    }
    cnt[n - 1] = -3;
    FAILS(MPI_ERR_COUNT, MPI_Allgatherv_c(&c, 0, MPI_CHAR, &c, cnt, dis, MPI_CHAR, MPI_COMM_WORLD));
    cnt[n - 1] = 0;
    dis[0] = -1;
    FAILS(MPI_ERR_ARG, MPI_Allgatherv_c(&c, 0, MPI_CHAR, &c, cnt, dis, MPI_CHAR, MPI_COMM_WORLD));
    free(cnt);
    free(dis);
    /* MPI_Reduce_local_c: the same checks, the same arithmetic */
    long long in[3] = {1, 2, 3}, acc[3] = {10, 20, 30};
    OK(MPI_Reduce_local_c(in, acc, (MPI_Count)3, MPI_LONG_LONG, MPI_SUM));
    CHECK(acc[0] == 11 && acc[1] == 22 && acc[2] == 33);
    /* (no communicator: MPI_COMM_SELF's handler) */
    OK(MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN));
    FAILS(MPI_ERR_COUNT, MPI_Reduce_local_c(in, acc, -(MPI_Count)1, MPI_LONG_LONG, MPI_SUM));
    OK(MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_ARE_FATAL));
}

/* Counts and displacements past INT_MAX (2 ranks). */
static void big(void) {
    const MPI_Count len = ((MPI_Count)1 << 31) + 8;
    unsigned char *buf = malloc((size_t)len);
    CHECK(buf != NULL);
    for (MPI_Count i = 0; i < len; i += 4096) buf[i] = me == 0 ? (unsigned char)(i >> 12) : 0;
    buf[len - 1] = me == 0 ? 0xA5 : 0;
    OK(MPI_Bcast_c(buf, len, MPI_BYTE, 0, MPI_COMM_WORLD));
    for (MPI_Count i = 0; i < len; i += 4096) CHECK(buf[i] == (unsigned char)(i >> 12));
    CHECK(buf[len - 1] == 0xA5);

    /* 8 bytes from each rank, rank 1's landing at 2^31 (an MPI_Aint
     * displacement an int cannot hold), into the same big buffer. */
    unsigned char mine[8];
    for (int i = 0; i < 8; i++) mine[i] = (unsigned char)(me * 16 + i + 1);
    MPI_Count cnt[2] = {8, 8};
    MPI_Aint dis[2] = {0, (MPI_Aint)1 << 31};
    OK(MPI_Allgatherv_c(mine, 8, MPI_BYTE, buf, cnt, dis, MPI_BYTE, MPI_COMM_WORLD));
    for (int k = 0; k < 2; k++)
        for (int i = 0; i < 8; i++) CHECK(buf[dis[k] + i] == (unsigned char)(k * 16 + i + 1));
    /* and back out from there, to the other rank */
    dis[0] = ((MPI_Aint)1 << 31);
    dis[1] = 0;
    memset(mine, 0, sizeof mine);
    OK(MPI_Scatterv_c(buf, cnt, dis, MPI_BYTE, mine, 8, MPI_BYTE, 0, MPI_COMM_WORLD));
    for (int i = 0; i < 8; i++) CHECK(mine[i] == (unsigned char)((1 - me) * 16 + i + 1));
    free(buf);
}

int main(int argc, char **argv) {
    OK(MPI_Init(&argc, &argv));
    OK(MPI_Comm_rank(MPI_COMM_WORLD, &me));
    OK(MPI_Comm_size(MPI_COMM_WORLD, &n));
    check_rank = me;

    /* 0, 1, and more than the 1056-byte inline size of one contribution */
    const MPI_Count counts[] = {0, 1, 300};
    for (int mode = 0; mode < 3; mode++)
        for (int c = 0; c < 3; c++) {
            rooted_and_reductions(mode, counts[c]);
            varying(mode, counts[c]);
        }

    OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    bad_arguments();
    OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL));

    if (n == 2 && !getenv("HMPI_TEST_NO_BIG")) big();

    OK(MPI_Finalize());
    PASSED("collectives_c");
    return 0;
}
