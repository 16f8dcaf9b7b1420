/* Intercommunicators between two halves of the world of uneven sizes
 * (world ranks r % 3 == 0 and the others, each ordered by descending world
 * rank): creation, remote group, point-to-point with wildcards both ways,
 * every collective with every root variant, merge with both high flags,
 * dup / split / create / compare / free; then MPI_Comm_create_group,
 * MPI_Comm_idup and info objects with their errors. 2 to 5 ranks. */
#include "check.h"
#include <string.h>

#define MAXN 64

static int wrank, wsize;
static int lsize, rsize, lrank, side;
static int lworld[MAXN], rworld[MAXN]; /* world rank of each local / remote rank */

static int side_of(int w) { return w % 3 == 0 ? 0 : 1; }

/* The world ranks of side `s`, by local rank (descending world rank). */
static int members(int s, int *out) {
    int k = 0;
    for (int w = wsize - 1; w >= 0; w--)
        if (side_of(w) == s) out[k++] = w;
    return k;
}

static void check_shape(MPI_Comm ic) {
    int flag, n, r;
    OK(MPI_Comm_test_inter(ic, &flag));
    CHECK(flag == 1);
    OK(MPI_Comm_size(ic, &n));
    OK(MPI_Comm_rank(ic, &r));
    OK(MPI_Comm_remote_size(ic, &flag));
    CHECK(n == lsize && r == lrank && flag == rsize);
    MPI_Group rg, wg;
    OK(MPI_Comm_remote_group(ic, &rg));
    OK(MPI_Comm_group(MPI_COMM_WORLD, &wg));
    int idx[MAXN], tr[MAXN];
    for (int i = 0; i < rsize; i++) idx[i] = i;
    OK(MPI_Group_translate_ranks(rg, rsize, idx, wg, tr));
    for (int i = 0; i < rsize; i++) CHECK(tr[i] == rworld[i]);
    OK(MPI_Group_free(&rg));
    OK(MPI_Group_free(&wg));
}

/* Every local rank sends to every remote rank; receives are wildcards. */
static void p2p(MPI_Comm ic, int tagbase) {
    MPI_Request reqs[MAXN];
    int out[MAXN];
    for (int j = 0; j < rsize; j++) {
        out[j] = 1000 * wrank + j;
        OK(MPI_Isend(&out[j], 1, MPI_INT, j, tagbase + lrank, ic, &reqs[j]));
    }
    int seen[MAXN] = {0};
    for (int k = 0; k < rsize; k++) {
        int v = -1;
        MPI_Status st;
        OK(MPI_Recv(&v, 1, MPI_INT, MPI_ANY_SOURCE, MPI_ANY_TAG, ic, &st));
        int s = st.MPI_SOURCE;
        CHECK(s >= 0 && s < rsize && !seen[s]);
        seen[s] = 1;
        CHECK(st.MPI_TAG == tagbase + s);
        CHECK(v == 1000 * rworld[s] + lrank);
    }
    OK(MPI_Waitall(rsize, reqs, MPI_STATUSES_IGNORE));
    /* Nothing of the next round may meet the wildcards above. */
    OK(MPI_Barrier(ic));
    /* One message to remote rank lrank % rsize; named sources. */
    int v = wrank, expect = 0;
    MPI_Request sr;
    OK(MPI_Isend(&v, 1, MPI_INT, lrank % rsize, 9, ic, &sr));
    for (int j = 0; j < rsize; j++) expect += j % lsize == lrank;
    for (int j = 0; j < rsize; j++) {
        if (j % lsize != lrank) continue;
        int got = -1, flag = 0;
        MPI_Status st;
        OK(MPI_Probe(j, 9, ic, &st));
        CHECK(st.MPI_SOURCE == j);
        OK(MPI_Iprobe(j, 9, ic, &flag, MPI_STATUS_IGNORE));
        CHECK(flag);
        OK(MPI_Recv(&got, 1, MPI_INT, j, 9, ic, &st));
        CHECK(got == rworld[j] && st.MPI_SOURCE == j);
        expect--;
    }
    CHECK(expect == 0);
    OK(MPI_Wait(&sr, MPI_STATUS_IGNORE));
    /* A rank past the remote group. */
    FAILS(MPI_ERR_RANK, MPI_Send(&v, 1, MPI_INT, rsize, 0, ic));
    OK(MPI_Barrier(ic));
}

static int root_arg(int rootside, int rt) {
    if (side != rootside) return rt;
    return lrank == rt ? MPI_ROOT : MPI_PROC_NULL;
}

static void collectives(MPI_Comm ic) {
    int rw[2] = {0, 0}; /* sum over side s of (world + 1) */
    int lw[2][MAXN];
    int n0 = members(0, lw[0]), n1 = members(1, lw[1]);
    for (int i = 0; i < n0; i++) rw[0] += lw[0][i] + 1;
    for (int i = 0; i < n1; i++) rw[1] += lw[1][i] + 1;
    int rside = 1 - side;

    OK(MPI_Barrier(ic));
    for (int rs = 0; rs < 2; rs++) {
        int rootsize = rs == side ? lsize : rsize;
        for (int rt = 0; rt < rootsize; rt++) {
            int root = root_arg(rs, rt);
            /* Bcast. */
            int b[5];
            for (int i = 0; i < 5; i++) b[i] = root == MPI_ROOT ? 100 * rt + i + 7 * rs : -1;
            OK(MPI_Bcast(b, 5, MPI_INT, root, ic));
            for (int i = 0; i < 5; i++)
                CHECK(b[i] == (root == MPI_PROC_NULL ? -1 : 100 * rt + i + 7 * rs));
            /* Reduce, sum and max. */
            int in[3], res[3] = {-1, -1, -1};
            for (int i = 0; i < 3; i++) in[i] = (wrank + 1) * (i + 1);
            OK(MPI_Reduce(in, res, 3, MPI_INT, MPI_SUM, root, ic));
            for (int i = 0; i < 3; i++)
                CHECK(res[i] == (root == MPI_ROOT ? rw[rside] * (i + 1) : -1));
            int mx = -1, mine = wrank;
            OK(MPI_Reduce(&mine, &mx, 1, MPI_INT, MPI_MAX, root, ic));
            if (root == MPI_ROOT) CHECK(mx == rworld[0]); /* the highest remote world rank */
            else CHECK(mx == -1);
            /* Gather: two ints from every remote rank. */
            int g[2 * MAXN], two[2] = {10 * wrank, 10 * wrank + 1};
            for (int i = 0; i < 2 * MAXN; i++) g[i] = -1;
            OK(MPI_Gather(two, 2, MPI_INT, g, 2, MPI_INT, root, ic));
            for (int j = 0; j < rsize; j++)
                for (int i = 0; i < 2; i++)
                    CHECK(g[2 * j + i] == (root == MPI_ROOT ? 10 * rworld[j] + i : -1));
            /* Scatter: piece j to remote rank j. */
            int sc[2 * MAXN], got[2] = {-1, -1};
            for (int j = 0; j < rsize; j++) sc[2 * j] = 50 * j, sc[2 * j + 1] = 50 * j + rs;
            OK(MPI_Scatter(sc, 2, MPI_INT, got, 2, MPI_INT, root, ic));
            if (side == rs) CHECK(got[0] == -1 && got[1] == -1);
            else CHECK(got[0] == 50 * lrank && got[1] == 50 * lrank + rs);
            /* Gatherv with a displacement per remote rank. */
            int cnt[MAXN], dsp[MAXN];
            for (int j = 0; j < rsize; j++) cnt[j] = j % 2 + 1, dsp[j] = 3 * j;
            for (int i = 0; i < 2 * MAXN; i++) g[i] = -1;
            OK(MPI_Gatherv(two, lrank % 2 + 1, MPI_INT, g, cnt, dsp, MPI_INT, root, ic));
            if (root == MPI_ROOT)
                for (int j = 0; j < rsize; j++)
                    for (int i = 0; i < cnt[j]; i++) CHECK(g[3 * j + i] == 10 * rworld[j] + i);
        }
    }
    /* Allreduce: the remote group's sum. */
    int in[4], res[4];
    for (int i = 0; i < 4; i++) in[i] = (wrank + 1) * (i + 1);
    OK(MPI_Allreduce(in, res, 4, MPI_INT, MPI_SUM, ic));
    for (int i = 0; i < 4; i++) CHECK(res[i] == rw[rside] * (i + 1));
    /* Nonblocking allreduce and bcast, overlapped. */
    MPI_Request rq[2];
    int b = lrank == 0 && side == 0 ? 4242 : -1;
    int broot = side == 0 ? (lrank == 0 ? MPI_ROOT : MPI_PROC_NULL) : 0;
    OK(MPI_Iallreduce(in, res, 4, MPI_INT, MPI_SUM, ic, &rq[0]));
    OK(MPI_Ibcast(&b, 1, MPI_INT, broot, ic, &rq[1]));
    OK(MPI_Waitall(2, rq, MPI_STATUSES_IGNORE));
    for (int i = 0; i < 4; i++) CHECK(res[i] == rw[rside] * (i + 1));
    CHECK(b == (broot == MPI_PROC_NULL ? -1 : 4242));
    /* Allgather: the remote group's pieces in remote rank order. */
    int two[2] = {wrank, wrank + 100}, all[2 * MAXN];
    OK(MPI_Allgather(two, 2, MPI_INT, all, 2, MPI_INT, ic));
    for (int j = 0; j < rsize; j++) CHECK(all[2 * j] == rworld[j] && all[2 * j + 1] == rworld[j] + 100);
    /* Alltoall. */
    int to[MAXN], from[MAXN];
    for (int j = 0; j < rsize; j++) to[j] = 100 * wrank + j;
    OK(MPI_Alltoall(to, 1, MPI_INT, from, 1, MPI_INT, ic));
    for (int j = 0; j < rsize; j++) CHECK(from[j] == 100 * rworld[j] + lrank);
    /* Reduce_scatter: both groups reduce 6 elements, scattered by the
     * local counts. */
    int T = 6, cnts[MAXN], off = 0, mine_off = 0;
    for (int i = 0; i < lsize; i++) {
        cnts[i] = T / lsize + (i < T % lsize);
        if (i == lrank) mine_off = off;
        off += cnts[i];
    }
    int sb[6], rb[6];
    for (int k = 0; k < T; k++) sb[k] = (wrank + 1) * (k + 1);
    OK(MPI_Reduce_scatter(sb, rb, cnts, MPI_INT, MPI_SUM, ic));
    for (int k = 0; k < cnts[lrank]; k++) CHECK(rb[k] == rw[rside] * (mine_off + k + 1));
    /* Reduce_scatter_block: lsize * rsize elements on both sides. */
    int sbb[MAXN * 4], rbb[MAXN];
    for (int k = 0; k < lsize * rsize; k++) sbb[k] = (wrank + 1) * (k + 1);
    OK(MPI_Reduce_scatter_block(sbb, rbb, rsize, MPI_INT, MPI_SUM, ic));
    for (int k = 0; k < rsize; k++) CHECK(rbb[k] == rw[rside] * (lrank * rsize + k + 1));
    /* Allgatherv and alltoallv with a displacement per remote rank. */
    {
        int cnt[MAXN], dsp[MAXN], sdsp[MAXN], sc[MAXN], buf[4 * MAXN], send[4 * MAXN];
        for (int j = 0; j < rsize; j++) cnt[j] = j % 2 + 1, dsp[j] = 3 * j;
        for (int i = 0; i < 4 * MAXN; i++) buf[i] = -1;
        int mine[2] = {wrank, wrank + 1};
        OK(MPI_Allgatherv(mine, lrank % 2 + 1, MPI_INT, buf, cnt, dsp, MPI_INT, ic));
        for (int j = 0; j < rsize; j++)
            for (int i = 0; i < 3; i++) CHECK(buf[3 * j + i] == (i < cnt[j] ? rworld[j] + i : -1));
        /* To remote rank j: j % 3 ints; from remote rank j: lrank % 3. */
        int off = 0;
        for (int j = 0; j < rsize; j++) {
            sc[j] = j % 3, sdsp[j] = off;
            for (int i = 0; i < sc[j]; i++) send[off + i] = 1000 * wrank + 10 * j + i;
            off += sc[j];
            cnt[j] = lrank % 3, dsp[j] = 4 * j;
        }
        for (int i = 0; i < 4 * MAXN; i++) buf[i] = -1;
        MPI_Request q;
        OK(MPI_Ialltoallv(send, sc, sdsp, MPI_INT, buf, cnt, dsp, MPI_INT, ic, &q));
        OK(MPI_Wait(&q, MPI_STATUS_IGNORE));
        for (int j = 0; j < rsize; j++)
            for (int i = 0; i < 4; i++)
                CHECK(buf[4 * j + i] == (i < cnt[j] ? 1000 * rworld[j] + 10 * lrank + i : -1));
    }
    /* A derived datatype (every other int) in a bcast and an allreduce,
     * and a persistent bcast started twice. */
    {
        MPI_Datatype every2;
        OK(MPI_Type_vector(3, 1, 2, MPI_INT, &every2));
        OK(MPI_Type_commit(&every2));
        int v[6] = {-1, -1, -1, -1, -1, -1};
        int root = side == 1 ? (lrank == lsize - 1 ? MPI_ROOT : MPI_PROC_NULL) : rsize - 1;
        if (root == MPI_ROOT) v[0] = 5, v[2] = 6, v[4] = 7;
        OK(MPI_Bcast(v, 1, every2, root, ic));
        if (root != MPI_PROC_NULL) CHECK(v[0] == 5 && v[2] == 6 && v[4] == 7);
        CHECK(v[1] == -1 && v[3] == -1 && v[5] == -1);
        int in6[6], out6[6] = {-1, -1, -1, -1, -1, -1};
        for (int i = 0; i < 6; i++) in6[i] = (wrank + 1) * (i + 1);
        OK(MPI_Allreduce(in6, out6, 1, every2, MPI_SUM, ic));
        for (int i = 0; i < 6; i++) CHECK(out6[i] == (i % 2 ? -1 : rw[rside] * (i + 1)));
        OK(MPI_Type_free(&every2));
        MPI_Request pr;
        int pv = -1;
        OK(MPI_Bcast_init(&pv, 1, MPI_INT, root, ic, MPI_INFO_NULL, &pr));
        for (int round = 0; round < 2; round++) {
            if (root == MPI_ROOT) pv = 70 + round;
            OK(MPI_Start(&pr));
            OK(MPI_Wait(&pr, MPI_STATUS_IGNORE));
            if (root != MPI_PROC_NULL) CHECK(pv == 70 + round);
        }
        OK(MPI_Request_free(&pr));
    }
    /* A nonblocking allreduce overlapped with point-to-point traffic on
     * the same intercommunicator: one message to remote rank
     * lrank % rsize, received by remote rank j from local ranks k with
     * k % rsize == j. */
    {
        MPI_Request q[MAXN + 2];
        int nq = 0, x = wrank, got[MAXN], sum1 = 0, one = wrank + 1, from_[MAXN];
        OK(MPI_Iallreduce(&one, &sum1, 1, MPI_INT, MPI_SUM, ic, &q[nq++]));
        int nrecv = 0;
        for (int j = 0; j < rsize; j++)
            if (j % lsize == lrank) {
                from_[nrecv] = j;
                OK(MPI_Irecv(&got[nrecv++], 1, MPI_INT, j, 33, ic, &q[nq++]));
            }
        OK(MPI_Isend(&x, 1, MPI_INT, lrank % rsize, 33, ic, &q[nq++]));
        OK(MPI_Waitall(nq, q, MPI_STATUSES_IGNORE));
        CHECK(sum1 == rw[rside]);
        for (int k = 0; k < nrecv; k++) CHECK(got[k] == rworld[from_[k]]);
        OK(MPI_Barrier(ic));
    }
    /* No scans on an intercommunicator; a bad root. */
    FAILS(MPI_ERR_COMM, MPI_Scan(in, res, 1, MPI_INT, MPI_SUM, ic));
    FAILS(MPI_ERR_ROOT, MPI_Bcast(&b, 1, MPI_INT, rsize, ic));
    OK(MPI_Barrier(ic));
}

int main(int argc, char **argv) {
    int flag, result;
    OK(MPI_Init(&argc, &argv));
    OK(MPI_Comm_rank(MPI_COMM_WORLD, &wrank));
    OK(MPI_Comm_size(MPI_COMM_WORLD, &wsize));
    check_rank = wrank;
    CHECK(wsize >= 2 && wsize <= MAXN);
    OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    OK(MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN));

    side = side_of(wrank);
    lsize = members(side, lworld);
    rsize = members(1 - side, rworld);
    for (int i = 0; i < lsize; i++)
        if (lworld[i] == wrank) lrank = i;

    MPI_Comm half, ic;
    OK(MPI_Comm_split(MPI_COMM_WORLD, side, -wrank, &half));
    OK(MPI_Comm_test_inter(half, &flag));
    CHECK(flag == 0);
    FAILS(MPI_ERR_COMM, MPI_Comm_remote_size(half, &flag));
    /* The leaders: local rank 0 of each half (its highest world rank). */
    OK(MPI_Intercomm_create(half, 0, MPI_COMM_WORLD, rworld[0], 77, &ic));
    OK(MPI_Comm_set_errhandler(ic, MPI_ERRORS_RETURN));
    check_shape(ic);
    p2p(ic, 10);
    collectives(ic);

    /* Compare, dup, free. */
    MPI_Comm d;
    OK(MPI_Comm_dup(ic, &d));
    check_shape(d);
    OK(MPI_Comm_compare(ic, ic, &result));
    CHECK(result == MPI_IDENT);
    OK(MPI_Comm_compare(ic, d, &result));
    CHECK(result == MPI_CONGRUENT);
    OK(MPI_Comm_compare(ic, half, &result));
    CHECK(result == MPI_UNEQUAL);
    p2p(d, 20);
    OK(MPI_Comm_free(&d));
    CHECK(d == MPI_COMM_NULL);

    /* Merge with both high flags: the group passing 0 first. */
    for (int hi = 0; hi < 2; hi++) {
        MPI_Comm m;
        int high = side == 0 ? hi : !hi;
        OK(MPI_Intercomm_merge(ic, high, &m));
        int mr, mn;
        OK(MPI_Comm_rank(m, &mr));
        OK(MPI_Comm_size(m, &mn));
        OK(MPI_Comm_test_inter(m, &flag));
        CHECK(flag == 0 && mn == wsize);
        CHECK(mr == (high ? rsize + lrank : lrank));
        int w = wrank, sum = 0;
        OK(MPI_Allreduce(&w, &sum, 1, MPI_INT, MPI_SUM, m));
        CHECK(sum == wsize * (wsize - 1) / 2);
        OK(MPI_Comm_free(&m));
    }
    {
        /* Both groups pass the same flag: some order of all processes. */
        MPI_Comm m;
        int mr, sum = 0;
        OK(MPI_Intercomm_merge(ic, 1, &m));
        OK(MPI_Comm_rank(m, &mr));
        OK(MPI_Allreduce(&mr, &sum, 1, MPI_INT, MPI_SUM, m));
        CHECK(sum == wsize * (wsize - 1) / 2);
        OK(MPI_Comm_free(&m));
    }

    /* Split: local rank 0s together, the rest together (where both
     * groups have some). */
    MPI_Comm sp;
    OK(MPI_Comm_split(ic, lrank == 0 ? 0 : 1, wrank, &sp));
    if (lrank == 0) {
        CHECK(sp != MPI_COMM_NULL);
        int rs;
        OK(MPI_Comm_remote_size(sp, &rs));
        CHECK(rs == 1);
        int v = wrank, got = -1;
        OK(MPI_Sendrecv(&v, 1, MPI_INT, 0, 3, &got, 1, MPI_INT, 0, 3, sp, MPI_STATUS_IGNORE));
        CHECK(got == rworld[0]);
        OK(MPI_Comm_free(&sp));
    } else if (rsize > 1) {
        CHECK(sp != MPI_COMM_NULL);
        int rs, ls;
        OK(MPI_Comm_remote_size(sp, &rs));
        OK(MPI_Comm_size(sp, &ls));
        CHECK(rs == rsize - 1 && ls == lsize - 1);
        OK(MPI_Comm_free(&sp));
    } else {
        CHECK(sp == MPI_COMM_NULL);
    }
    /* Create: each side's local rank 0 only. */
    MPI_Group lg, g0;
    int zero = 0;
    OK(MPI_Comm_group(ic, &lg));
    OK(MPI_Group_incl(lg, 1, &zero, &g0));
    MPI_Comm cr;
    OK(MPI_Comm_create(ic, g0, &cr));
    if (lrank == 0) {
        CHECK(cr != MPI_COMM_NULL);
        int b = side == 0 ? 31 : -1;
        OK(MPI_Bcast(&b, 1, MPI_INT, side == 0 ? MPI_ROOT : 0, cr));
        CHECK(b == 31 || side == 0);
        OK(MPI_Comm_free(&cr));
    } else {
        CHECK(cr == MPI_COMM_NULL);
    }
    OK(MPI_Group_free(&g0));
    OK(MPI_Group_free(&lg));
    OK(MPI_Comm_free(&ic));
    OK(MPI_Comm_free(&half));

    /* MPI_Comm_create_group: the even world ranks only call it. */
    MPI_Group wg, eg;
    int evens[MAXN], ne = 0;
    for (int w = 0; w < wsize; w += 2) evens[ne++] = w;
    OK(MPI_Comm_group(MPI_COMM_WORLD, &wg));
    OK(MPI_Group_incl(wg, ne, evens, &eg));
    if (wrank % 2 == 0) {
        MPI_Comm ec;
        OK(MPI_Comm_create_group(MPI_COMM_WORLD, eg, 5, &ec));
        int er, en, sum = 0, one = 1;
        OK(MPI_Comm_rank(ec, &er));
        OK(MPI_Comm_size(ec, &en));
        CHECK(en == ne && er == wrank / 2);
        OK(MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, ec));
        CHECK(sum == ne);
        OK(MPI_Comm_free(&ec));
    }
    OK(MPI_Group_free(&eg));
    OK(MPI_Group_free(&wg));

    /* MPI_Comm_idup: two started, then waited for. */
    MPI_Comm i1, i2;
    MPI_Request ir[2];
    OK(MPI_Comm_idup(MPI_COMM_WORLD, &i1, &ir[0]));
    OK(MPI_Comm_idup(MPI_COMM_WORLD, &i2, &ir[1]));
    OK(MPI_Waitall(2, ir, MPI_STATUSES_IGNORE));
    CHECK(ir[0] == MPI_REQUEST_NULL && ir[1] == MPI_REQUEST_NULL);
    OK(MPI_Comm_compare(i1, i2, &result));
    CHECK(result == MPI_CONGRUENT);
    {
        int v = wrank, got = -1;
        int next = (wrank + 1) % wsize, prev = (wrank + wsize - 1) % wsize;
        OK(MPI_Sendrecv(&v, 1, MPI_INT, next, 0, &got, 1, MPI_INT, prev, 0, i2, MPI_STATUS_IGNORE));
        CHECK(got == prev);
    }

    /* An idup does not wait for the others: rank 0 starts one and then
     * sends synchronously to rank 1, which receives before it starts its
     * own. */
    {
        MPI_Comm i3;
        MPI_Request r3;
        int v = 17, got = -1;
        if (wrank == 0) {
            OK(MPI_Comm_idup(MPI_COMM_WORLD, &i3, &r3));
            OK(MPI_Ssend(&v, 1, MPI_INT, 1, 44, MPI_COMM_WORLD));
        } else if (wrank == 1) {
            OK(MPI_Recv(&got, 1, MPI_INT, 0, 44, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
            CHECK(got == 17);
            OK(MPI_Comm_idup(MPI_COMM_WORLD, &i3, &r3));
        } else {
            OK(MPI_Comm_idup(MPI_COMM_WORLD, &i3, &r3));
        }
        int done = 0;
        while (!done) OK(MPI_Test(&r3, &done, MPI_STATUS_IGNORE));
        int n3;
        OK(MPI_Comm_size(i3, &n3));
        CHECK(n3 == wsize);
        /* A blocking dup after an idup on the same communicator. */
        MPI_Comm i4, i5;
        MPI_Request r4;
        OK(MPI_Comm_idup(i3, &i4, &r4));
        OK(MPI_Comm_dup(i3, &i5));
        OK(MPI_Wait(&r4, MPI_STATUS_IGNORE));
        OK(MPI_Comm_compare(i4, i5, &result));
        CHECK(result == MPI_CONGRUENT);
        OK(MPI_Comm_free(&i5));
        OK(MPI_Comm_free(&i4));
        OK(MPI_Comm_free(&i3));
    }

    /* Info objects. */
    MPI_Info info, dupi, used;
    char key[MPI_MAX_INFO_KEY], val[MPI_MAX_INFO_VAL];
    int nkeys, vlen, buflen;
    OK(MPI_Info_create(&info));
    OK(MPI_Info_get_nkeys(info, &nkeys));
    CHECK(nkeys == 0);
    OK(MPI_Info_set(info, "hmpi_alpha", "one"));
    OK(MPI_Info_set(info, "hmpi_beta", "two two"));
    OK(MPI_Info_set(info, "hmpi_alpha", "uno"));
    OK(MPI_Info_get_nkeys(info, &nkeys));
    CHECK(nkeys == 2);
    OK(MPI_Info_get_nthkey(info, 0, key));
    CHECK(strcmp(key, "hmpi_alpha") == 0);
    OK(MPI_Info_get_nthkey(info, 1, key));
    CHECK(strcmp(key, "hmpi_beta") == 0);
    OK(MPI_Info_get_valuelen(info, "hmpi_beta", &vlen, &flag));
    CHECK(flag && vlen == 7);
    OK(MPI_Info_get(info, "hmpi_alpha", MPI_MAX_INFO_VAL - 1, val, &flag));
    CHECK(flag && strcmp(val, "uno") == 0);
    OK(MPI_Info_get(info, "hmpi_beta", 3, val, &flag));
    CHECK(flag && strcmp(val, "two") == 0);
    buflen = 4;
    OK(MPI_Info_get_string(info, "hmpi_beta", &buflen, val, &flag));
    CHECK(flag && buflen == 8 && strcmp(val, "two") == 0);
    buflen = sizeof val;
    OK(MPI_Info_get_string(info, "hmpi_gamma", &buflen, val, &flag));
    CHECK(!flag && buflen == (int)sizeof val);
    OK(MPI_Info_dup(info, &dupi));
    OK(MPI_Info_delete(info, "hmpi_alpha"));
    OK(MPI_Info_get_nkeys(info, &nkeys));
    CHECK(nkeys == 1);
    OK(MPI_Info_get_nkeys(dupi, &nkeys));
    CHECK(nkeys == 2);
    FAILS(MPI_ERR_INFO_NOKEY, MPI_Info_delete(info, "hmpi_alpha"));
    FAILS(MPI_ERR_ARG, MPI_Info_get_nthkey(info, 1, key));
    {
        char longkey[MPI_MAX_INFO_KEY + 8];
        memset(longkey, 'k', sizeof longkey - 1);
        longkey[sizeof longkey - 1] = 0;
        FAILS(MPI_ERR_INFO_KEY, MPI_Info_set(info, longkey, "v"));
        FAILS(MPI_ERR_INFO_KEY, MPI_Info_set(info, "", "v"));
        FAILS(MPI_ERR_INFO_VALUE, MPI_Info_set(info, "k", ""));
    }
    FAILS(MPI_ERR_INFO, MPI_Info_set(MPI_INFO_NULL, "k", "v"));
    FAILS(MPI_ERR_INFO, MPI_Info_get_nkeys(MPI_INFO_NULL, &nkeys));
    FAILS(MPI_ERR_INFO, MPI_Info_set(MPI_INFO_ENV, "k", "v"));
    FAILS(MPI_ERR_INFO, MPI_Info_free(&(MPI_Info){MPI_INFO_ENV}));
    OK(MPI_Info_get_string(MPI_INFO_ENV, "command", &(int){MPI_MAX_INFO_VAL}, val, &flag));
    CHECK(flag && strlen(val) > 0);
    {
        MPI_Info env;
        OK(MPI_Info_create_env(argc, argv, &env));
        OK(MPI_Info_get_nkeys(env, &nkeys));
        CHECK(nkeys >= 1);
        OK(MPI_Info_free(&env));
    }

    /* Hints on communicators. */
    MPI_Comm hc;
    OK(MPI_Comm_dup_with_info(MPI_COMM_WORLD, dupi, &hc));
    OK(MPI_Comm_get_info(hc, &used));
    OK(MPI_Info_get_nkeys(used, &nkeys));
    CHECK(nkeys == 2);
    OK(MPI_Info_get(used, "hmpi_alpha", MPI_MAX_INFO_VAL - 1, val, &flag));
    CHECK(flag && strcmp(val, "uno") == 0);
    OK(MPI_Info_free(&used));
    OK(MPI_Info_set(info, "hmpi_delta", "4"));
    OK(MPI_Comm_set_info(hc, info));
    OK(MPI_Comm_get_info(hc, &used));
    OK(MPI_Info_get_nkeys(used, &nkeys));
    CHECK(nkeys == 3);
    OK(MPI_Info_free(&used));
    {
        MPI_Comm hd;
        OK(MPI_Comm_dup(hc, &hd));
        OK(MPI_Comm_get_info(hd, &used));
        OK(MPI_Info_get_nkeys(used, &nkeys));
        CHECK(nkeys == 3);
        OK(MPI_Info_free(&used));
        OK(MPI_Comm_free(&hd));
        MPI_Request r;
        OK(MPI_Comm_idup_with_info(hc, MPI_INFO_NULL, &hd, &r));
        OK(MPI_Wait(&r, MPI_STATUS_IGNORE));
        OK(MPI_Comm_get_info(hd, &used));
        OK(MPI_Info_get_nkeys(used, &nkeys));
        CHECK(nkeys == 0);
        OK(MPI_Info_free(&used));
        OK(MPI_Comm_free(&hd));
        OK(MPI_Comm_split_type(hc, MPI_COMM_TYPE_SHARED, 0, info, &hd));
        OK(MPI_Comm_get_info(hd, &used));
        OK(MPI_Info_get_valuelen(used, "hmpi_delta", &vlen, &flag));
        CHECK(flag && vlen == 1);
        OK(MPI_Info_free(&used));
        OK(MPI_Comm_free(&hd));
    }
    FAILS(MPI_ERR_INFO, MPI_Comm_set_info(hc, MPI_INFO_NULL));
    OK(MPI_Comm_free(&hc));
    OK(MPI_Info_free(&info));
    FAILS(MPI_ERR_INFO, MPI_Info_get_nkeys(info, &nkeys));
    OK(MPI_Info_free(&dupi));
    OK(MPI_Comm_free(&i1));
    OK(MPI_Comm_free(&i2));
    OK(MPI_Finalize());
    PASSED("intercomm");
    return 0;
}
