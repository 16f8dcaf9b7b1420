/* Process topologies and neighbourhood collectives from C: MPI_Dims_create
 * against the standard's examples; Cartesian grids (periodic and not)
 * with coords, rank, shift, sub, get, map; a graph and distributed graphs
 * (adjacent and general, with weights) and their queries; every
 * neighbourhood collective, blocking, nonblocking and persistent, checked
 * against values computed here from the topology (blocks of MPI_PROC_NULL
 * neighbours untouched, MPI's order where both neighbours of a periodic
 * dimension of 1 or 2 are the same process); bad arguments. */
#include "check.h"
#include <string.h>

static int me, n;

#define UNTOUCHED (-7)

/* The rank at (c0, c1) of a dims[0] x dims[1] grid, -1 (PROC_NULL) off a
 * non-periodic edge. */
static int at(const int *dims, const int *per, int c0, int c1) {
    int c[2] = {c0, c1};
    for (int d = 0; d < 2; d++) {
        if (c[d] < 0 || c[d] >= dims[d]) {
            if (!per[d]) return MPI_PROC_NULL;
            c[d] = ((c[d] % dims[d]) + dims[d]) % dims[d];
        }
    }
    return c[0] * dims[1] + c[1];
}

/* Runs one neighbourhood all-to-all of ints in `how` (0 blocking, 1
 * nonblocking, 2 persistent started twice). `kind`: 0 allgather, 1
 * alltoall, 2 allgatherv, 3 alltoallv, 4 alltoallw. Every block holds one
 * int; v/w forms put receive block m at 2*m (gaps untouched). */
static void exchange(MPI_Comm c, int kind, int how, const int *send, int outdeg, int *recv,
                     int indeg) {
    int *one = malloc(sizeof(int) * (outdeg + indeg + 1));
    int *sd = malloc(sizeof(int) * (outdeg + 1));
    int *rd = malloc(sizeof(int) * (indeg + 1));
    MPI_Aint *sa = malloc(sizeof(MPI_Aint) * (outdeg + 1));
    MPI_Aint *ra = malloc(sizeof(MPI_Aint) * (indeg + 1));
    MPI_Datatype *st = malloc(sizeof(MPI_Datatype) * (outdeg + 1));
    MPI_Datatype *rt = malloc(sizeof(MPI_Datatype) * (indeg + 1));
    for (int i = 0; i < outdeg + indeg + 1; i++) one[i] = 1;
    for (int k = 0; k < outdeg; k++) {
        sd[k] = k;
        sa[k] = (MPI_Aint)(k * sizeof(int));
        st[k] = MPI_INT;
    }
    for (int m = 0; m < indeg; m++) {
        rd[m] = 2 * m;
        ra[m] = (MPI_Aint)(2 * m * sizeof(int));
        rt[m] = MPI_INT;
    }
    MPI_Request r = MPI_REQUEST_NULL;
    MPI_Request *rp = how == 0 ? NULL : &r;
    for (int round = 0; round < (how == 2 ? 2 : 1); round++) {
        if (how == 2 && round == 1) {
            OK(MPI_Start(&r));
            OK(MPI_Wait(&r, MPI_STATUS_IGNORE));
            break;
        }
        switch (kind * 3 + how) {
        case 0: OK(MPI_Neighbor_allgather(send, 1, MPI_INT, recv, 1, MPI_INT, c)); break;
        case 1: OK(MPI_Ineighbor_allgather(send, 1, MPI_INT, recv, 1, MPI_INT, c, rp)); break;
        case 2: OK(MPI_Neighbor_allgather_init(send, 1, MPI_INT, recv, 1, MPI_INT, c, MPI_INFO_NULL, rp)); break;
        case 3: OK(MPI_Neighbor_alltoall(send, 1, MPI_INT, recv, 1, MPI_INT, c)); break;
        case 4: OK(MPI_Ineighbor_alltoall(send, 1, MPI_INT, recv, 1, MPI_INT, c, rp)); break;
        case 5: OK(MPI_Neighbor_alltoall_init(send, 1, MPI_INT, recv, 1, MPI_INT, c, MPI_INFO_NULL, rp)); break;
        case 6: OK(MPI_Neighbor_allgatherv(send, 1, MPI_INT, recv, one, rd, MPI_INT, c)); break;
        case 7: OK(MPI_Ineighbor_allgatherv(send, 1, MPI_INT, recv, one, rd, MPI_INT, c, rp)); break;
        case 8: OK(MPI_Neighbor_allgatherv_init(send, 1, MPI_INT, recv, one, rd, MPI_INT, c, MPI_INFO_NULL, rp)); break;
        case 9: OK(MPI_Neighbor_alltoallv(send, one, sd, MPI_INT, recv, one, rd, MPI_INT, c)); break;
        case 10: OK(MPI_Ineighbor_alltoallv(send, one, sd, MPI_INT, recv, one, rd, MPI_INT, c, rp)); break;
        case 11: OK(MPI_Neighbor_alltoallv_init(send, one, sd, MPI_INT, recv, one, rd, MPI_INT, c, MPI_INFO_NULL, rp)); break;
        case 12: OK(MPI_Neighbor_alltoallw(send, one, sa, st, recv, one, ra, rt, c)); break;
        case 13: OK(MPI_Ineighbor_alltoallw(send, one, sa, st, recv, one, ra, rt, c, rp)); break;
        case 14: OK(MPI_Neighbor_alltoallw_init(send, one, sa, st, recv, one, ra, rt, c, MPI_INFO_NULL, rp)); break;
        default: CHECK(0);
        }
        if (how == 1) OK(MPI_Wait(&r, MPI_STATUS_IGNORE));
        if (how == 2) {
            OK(MPI_Start(&r));
            OK(MPI_Wait(&r, MPI_STATUS_IGNORE));
            CHECK(r != MPI_REQUEST_NULL);
        }
    }
    if (how == 2) OK(MPI_Request_free(&r));
    free(one); free(sd); free(rd); free(sa); free(ra); free(st); free(rt);
}

/* Every collective in every mode on `c`, whose receive block m comes from
 * src[m] (PROC_NULL: untouched) and is that source's send block pair[m]. */
static void all_collectives(MPI_Comm c, int outdeg, int indeg, const int *src, const int *pair) {
    int *send = malloc(sizeof(int) * (outdeg + 1));
    int *recv = malloc(sizeof(int) * (2 * indeg + 1));
    for (int kind = 0; kind < 5; kind++) {
        int gather = kind == 0 || kind == 2, spread = kind >= 2 ? 2 : 1;
        for (int how = 0; how < 3; how++) {
            for (int k = 0; k < outdeg; k++) send[k] = gather ? me * 100 : me * 100 + k;
            for (int i = 0; i < 2 * indeg + 1; i++) recv[i] = UNTOUCHED;
            exchange(c, kind, how, send, outdeg, recv, indeg);
            for (int m = 0; m < indeg; m++) {
                int want = src[m] == MPI_PROC_NULL ? UNTOUCHED
                                                   : src[m] * 100 + (gather ? 0 : pair[m]);
                if (recv[spread * m] != want)
                    fprintf(stderr, "rank %d: kind %d how %d block %d: %d, not %d\n", me, kind,
                            how, m, recv[spread * m], want);
                CHECK(recv[spread * m] == want);
                if (spread == 2) CHECK(recv[2 * m + 1] == UNTOUCHED);
            }
            CHECK(recv[spread * indeg] == UNTOUCHED || spread == 1);
        }
    }
    free(send);
    free(recv);
}

static void dims_create(void) {
    int d[3];
    d[0] = d[1] = 0;
    OK(MPI_Dims_create(6, 2, d));
    CHECK(d[0] == 3 && d[1] == 2);
    d[0] = d[1] = 0;
    OK(MPI_Dims_create(7, 2, d));
    CHECK(d[0] == 7 && d[1] == 1);
    d[0] = 0; d[1] = 3; d[2] = 0;
    OK(MPI_Dims_create(6, 3, d));
    CHECK(d[0] == 2 && d[1] == 3 && d[2] == 1);
    d[0] = 0; d[1] = 3; d[2] = 0;
    FAILS(MPI_ERR_DIMS, MPI_Dims_create(7, 3, d));
    d[0] = d[1] = d[2] = 0;
    OK(MPI_Dims_create(12, 3, d));
    CHECK(d[0] == 3 && d[1] == 2 && d[2] == 2);
    d[0] = -1; d[1] = 0;
    FAILS(MPI_ERR_DIMS, MPI_Dims_create(4, 2, d));
    FAILS(MPI_ERR_DIMS, MPI_Dims_create(4, -1, d));
}

static void cartesian(int periodic) {
    int dims[2] = {0, 0}, per[2] = {periodic, periodic};
    OK(MPI_Dims_create(n, 2, dims));
    MPI_Comm c;
    OK(MPI_Cart_create(MPI_COMM_WORLD, 2, dims, per, 1, &c));
    CHECK(c != MPI_COMM_NULL);
    int st, nd, cme;
    OK(MPI_Topo_test(c, &st));
    CHECK(st == MPI_CART);
    OK(MPI_Cartdim_get(c, &nd));
    CHECK(nd == 2);
    OK(MPI_Comm_rank(c, &cme));
    CHECK(cme == me);
    int gd[2], gp[2], gc[2], cc[2];
    OK(MPI_Cart_get(c, 2, gd, gp, gc));
    CHECK(gd[0] == dims[0] && gd[1] == dims[1] && gp[0] == periodic && gp[1] == periodic);
    CHECK(gc[0] == me / dims[1] && gc[1] == me % dims[1]);
    for (int r = 0; r < n; r++) {
        int rr;
        OK(MPI_Cart_coords(c, r, 2, cc));
        CHECK(cc[0] == r / dims[1] && cc[1] == r % dims[1]);
        OK(MPI_Cart_rank(c, cc, &rr));
        CHECK(rr == r);
    }
    /* Wrap-around of a periodic coordinate; off a non-periodic edge. */
    cc[0] = -1; cc[1] = 0;
    if (periodic) {
        int rr;
        OK(MPI_Cart_rank(c, cc, &rr));
        CHECK(rr == (dims[0] - 1) * dims[1]);
    } else {
        FAILS(MPI_ERR_ARG, MPI_Cart_rank(c, cc, &st));
    }
    int src[4], pair[4];
    for (int d = 0; d < 2; d++) {
        int s, t;
        OK(MPI_Cart_shift(c, d, 1, &s, &t));
        int below = at(dims, per, gc[0] - (d == 0), gc[1] - (d == 1));
        int above = at(dims, per, gc[0] + (d == 0), gc[1] + (d == 1));
        CHECK(s == below && t == above);
        OK(MPI_Cart_shift(c, d, -2, &s, &t));
        CHECK(s == at(dims, per, gc[0] + 2 * (d == 0), gc[1] + 2 * (d == 1)));
        CHECK(t == at(dims, per, gc[0] - 2 * (d == 0), gc[1] - 2 * (d == 1)));
        src[2 * d] = below;
        src[2 * d + 1] = above;
        pair[2 * d] = 2 * d + 1;
        pair[2 * d + 1] = 2 * d;
    }
    FAILS(MPI_ERR_ARG, MPI_Cart_shift(c, 2, 1, &st, &nd));
    FAILS(MPI_ERR_RANK, MPI_Cart_coords(c, n, 2, cc));
    all_collectives(c, 4, 4, src, pair);

    /* A strided datatype (2 ints, stride 2: packed by the sender,
     * unpacked by the receiver), and received as 2 plain ints. */
    MPI_Datatype vec;
    OK(MPI_Type_vector(2, 1, 2, MPI_INT, &vec));
    OK(MPI_Type_commit(&vec));
    int sv[12], rv[12], rp[8];
    for (int k = 0; k < 4; k++) {
        sv[3 * k] = me * 100 + k;
        sv[3 * k + 1] = -9;
        sv[3 * k + 2] = me * 100 + k + 50;
    }
    for (int how = 0; how < 2; how++) {
        for (int i = 0; i < 12; i++) rv[i] = UNTOUCHED;
        for (int i = 0; i < 8; i++) rp[i] = UNTOUCHED;
        if (how == 0) {
            OK(MPI_Neighbor_alltoall(sv, 1, vec, rv, 1, vec, c));
            OK(MPI_Neighbor_alltoall(sv, 1, vec, rp, 2, MPI_INT, c));
        } else {
            MPI_Request q[2];
            OK(MPI_Ineighbor_alltoall(sv, 1, vec, rv, 1, vec, c, &q[0]));
            OK(MPI_Ineighbor_alltoall(sv, 1, vec, rp, 2, MPI_INT, c, &q[1]));
            OK(MPI_Waitall(2, q, MPI_STATUSES_IGNORE));
        }
        for (int m = 0; m < 4; m++) {
            int a = src[m] == MPI_PROC_NULL ? UNTOUCHED : src[m] * 100 + pair[m];
            int b = src[m] == MPI_PROC_NULL ? UNTOUCHED : a + 50;
            CHECK(rv[3 * m] == a && rv[3 * m + 1] == UNTOUCHED && rv[3 * m + 2] == b);
            CHECK(rp[2 * m] == a && rp[2 * m + 1] == b);
        }
    }
    /* A block length that differs from the sender's is an error where a
     * block arrives (every process still completes its part). */
    int any = 0;
    for (int m = 0; m < 4; m++) any |= src[m] != MPI_PROC_NULL;
    if (any) FAILS(MPI_ERR_ARG, MPI_Neighbor_alltoall(sv, 1, vec, rp, 1, MPI_INT, c));
    else OK(MPI_Neighbor_alltoall(sv, 1, vec, rp, 1, MPI_INT, c));
    OK(MPI_Type_free(&vec));

    /* The large-count forms. */
    MPI_Count one_c[4] = {1, 1, 1, 1};
    MPI_Aint sd_c[4] = {0, 1, 2, 3}, rd_c[4] = {0, 2, 4, 6};
    MPI_Aint sb_c[4] = {0, 4, 8, 12}, rb_c[4] = {0, 8, 16, 24};
    MPI_Datatype ints[4] = {MPI_INT, MPI_INT, MPI_INT, MPI_INT};
    int s4[4], r8[8];
    for (int k = 0; k < 4; k++) s4[k] = me * 100 + k;
    for (int variant = 0; variant < 4; variant++) {
        MPI_Request q;
        int spread = variant == 0 ? 1 : 2;
        for (int i = 0; i < 8; i++) r8[i] = UNTOUCHED;
        if (variant == 0) {
            OK(MPI_Neighbor_alltoall_c(s4, 1, MPI_INT, r8, 1, MPI_INT, c));
        } else if (variant == 1) {
            OK(MPI_Ineighbor_alltoallv_c(s4, one_c, sd_c, MPI_INT, r8, one_c, rd_c, MPI_INT, c, &q));
            OK(MPI_Wait(&q, MPI_STATUS_IGNORE));
        } else if (variant == 2) {
            OK(MPI_Neighbor_alltoallw_init_c(s4, one_c, sb_c, ints, r8, one_c, rb_c, ints, c,
                                             MPI_INFO_NULL, &q));
            OK(MPI_Start(&q));
            OK(MPI_Wait(&q, MPI_STATUS_IGNORE));
            OK(MPI_Request_free(&q));
        } else {
            OK(MPI_Neighbor_allgatherv_c(&s4[1], 1, MPI_INT, r8, one_c, rd_c, MPI_INT, c));
        }
        for (int m = 0; m < 4; m++) {
            int k = variant == 3 ? 1 : pair[m];
            int want = src[m] == MPI_PROC_NULL ? UNTOUCHED : src[m] * 100 + k;
            CHECK(r8[spread * m] == want);
            if (spread == 2) CHECK(r8[2 * m + 1] == UNTOUCHED);
        }
    }

    /* Sub-grids: the rows (dimension 1 kept) and the columns. */
    for (int keep = 0; keep < 2; keep++) {
        int remain[2] = {keep == 0, keep == 1};
        MPI_Comm sub;
        OK(MPI_Cart_sub(c, remain, &sub));
        int ss, sr, sd, sdims[1], sper[1], scoords[1];
        OK(MPI_Comm_size(sub, &ss));
        OK(MPI_Comm_rank(sub, &sr));
        CHECK(ss == dims[keep] && sr == gc[keep]);
        OK(MPI_Cartdim_get(sub, &sd));
        CHECK(sd == 1);
        OK(MPI_Cart_get(sub, 1, sdims, sper, scoords));
        CHECK(sdims[0] == dims[keep] && sper[0] == periodic && scoords[0] == gc[keep]);
        OK(MPI_Comm_free(&sub));
    }
    /* A duplicate keeps the topology, a split does not. */
    MPI_Comm d, s;
    OK(MPI_Comm_dup(c, &d));
    OK(MPI_Topo_test(d, &st));
    CHECK(st == MPI_CART);
    all_collectives(d, 4, 4, src, pair);
    OK(MPI_Comm_split(c, 0, me, &s));
    OK(MPI_Topo_test(s, &st));
    CHECK(st == MPI_UNDEFINED);
    FAILS(MPI_ERR_TOPOLOGY, MPI_Neighbor_allgather(&me, 1, MPI_INT, gd, 1, MPI_INT, s));
    OK(MPI_Comm_free(&s));
    OK(MPI_Comm_free(&d));
    OK(MPI_Comm_free(&c));

    /* A 1-D grid smaller than the world: the others get MPI_COMM_NULL. */
    int small = n > 1 ? n - 1 : 1, nr;
    OK(MPI_Cart_create(MPI_COMM_WORLD, 1, &small, per, 0, &c));
    OK(MPI_Cart_map(MPI_COMM_WORLD, 1, &small, per, &nr));
    if (me < small) {
        CHECK(c != MPI_COMM_NULL && nr == me);
        OK(MPI_Comm_free(&c));
    } else {
        CHECK(c == MPI_COMM_NULL && nr == MPI_UNDEFINED);
    }
}

/* The ring as a graph: node i's neighbours are i-1 and i+1 (the same node
 * twice for 2 nodes, itself twice for 1). */
static void ring_neighbors(int i, int *nb) {
    nb[0] = (i + n - 1) % n;
    nb[1] = (i + 1) % n;
}

static void graph(void) {
    int *index = malloc(sizeof(int) * n), *edges = malloc(sizeof(int) * 2 * n);
    for (int i = 0; i < n; i++) {
        index[i] = 2 * (i + 1);
        ring_neighbors(i, &edges[2 * i]);
    }
    MPI_Comm g;
    OK(MPI_Graph_create(MPI_COMM_WORLD, n, index, edges, 0, &g));
    int st, nn, ne, cnt, nb[2], gi[64], ge[128];
    OK(MPI_Topo_test(g, &st));
    CHECK(st == MPI_GRAPH);
    OK(MPI_Graphdims_get(g, &nn, &ne));
    CHECK(nn == n && ne == 2 * n);
    OK(MPI_Graph_get(g, 64, 128, gi, ge));
    for (int i = 0; i < n; i++) CHECK(gi[i] == index[i] && ge[2 * i] == edges[2 * i]);
    OK(MPI_Graph_neighbors_count(g, me, &cnt));
    CHECK(cnt == 2);
    OK(MPI_Graph_neighbors(g, me, 2, nb));
    CHECK(nb[0] == edges[2 * me] && nb[1] == edges[2 * me + 1]);
    FAILS(MPI_ERR_RANK, MPI_Graph_neighbors(g, n, 2, nb));
    OK(MPI_Graph_map(MPI_COMM_WORLD, n, index, edges, &nn));
    CHECK(nn == me);
    FAILS(MPI_ERR_TOPOLOGY, MPI_Cartdim_get(g, &nn));
    /* Pairing: the t-th occurrence of s in my list is the t-th
     * occurrence of me in s's list. */
    int src[2], pair[2];
    for (int m = 0; m < 2; m++) {
        int s = nb[m], t = 0, theirs[2];
        for (int j = 0; j < m; j++) t += nb[j] == s;
        ring_neighbors(s, theirs);
        int k = -1;
        for (int j = 0; j < 2; j++)
            if (theirs[j] == me && t-- == 0) { k = j; break; }
        CHECK(k >= 0);
        src[m] = s;
        pair[m] = k;
    }
    all_collectives(g, 2, 2, src, pair);
    OK(MPI_Comm_free(&g));
    /* An edge to a node that does not exist. */
    edges[0] = n;
    FAILS(MPI_ERR_ARG, MPI_Graph_create(MPI_COMM_WORLD, n, index, edges, 0, &g));
    free(index);
    free(edges);
}

/* Checks a weighted distributed graph: every process sends, on its edge
 * of weight w to d, the value me*10000 + d*100 + w; so the value received
 * on an in-edge of weight w from s is s*10000 + me*100 + w. */
static void check_weighted(MPI_Comm g, int indeg, int outdeg) {
    int in, out, w;
    OK(MPI_Dist_graph_neighbors_count(g, &in, &out, &w));
    CHECK(in == indeg && out == outdeg && w == 1);
    int srcs[8], sw[8], dsts[8], dw[8];
    OK(MPI_Dist_graph_neighbors(g, 8, srcs, sw, 8, dsts, dw));
    int send[8], recv[16];
    for (int how = 0; how < 3; how++) {
        for (int k = 0; k < out; k++) send[k] = me * 10000 + dsts[k] * 100 + dw[k];
        for (int i = 0; i < 16; i++) recv[i] = UNTOUCHED;
        exchange(g, 1, how, send, out, recv, in);
        for (int m = 0; m < in; m++) CHECK(recv[m] == srcs[m] * 10000 + me * 100 + sw[m]);
        for (int i = 0; i < 16; i++) recv[i] = UNTOUCHED;
        exchange(g, 4, how, send, out, recv, in);
        for (int m = 0; m < in; m++) {
            CHECK(recv[2 * m] == srcs[m] * 10000 + me * 100 + sw[m]);
            CHECK(recv[2 * m + 1] == UNTOUCHED);
        }
        /* allgather: one value to every out-neighbour */
        send[0] = me;
        exchange(g, 0, how, send, out, recv, in);
        for (int m = 0; m < in; m++) CHECK(recv[m] == srcs[m]);
    }
}

static void dist_graph(void) {
    /* Adjacent: in-edges from me-1 (weight 1) and me+2 (weight 2), out-edges
     * to me+1 (weight 1) and me-2 (weight 2). */
    int srcs[2] = {(me + n - 1) % n, (me + 2) % n}, sw[2] = {1, 2};
    int dsts[2] = {(me + 1) % n, (me + 2 * n - 2) % n}, dw[2] = {1, 2};
    MPI_Comm g;
    OK(MPI_Dist_graph_create_adjacent(MPI_COMM_WORLD, 2, srcs, sw, 2, dsts, dw, MPI_INFO_NULL, 0,
                                      &g));
    int st;
    OK(MPI_Topo_test(g, &st));
    CHECK(st == MPI_DIST_GRAPH);
    int gs[2], gsw[2], gd[2], gdw[2];
    OK(MPI_Dist_graph_neighbors(g, 2, gs, gsw, 2, gd, gdw));
    CHECK(gs[0] == srcs[0] && gs[1] == srcs[1] && gsw[0] == 1 && gsw[1] == 2);
    CHECK(gd[0] == dsts[0] && gd[1] == dsts[1] && gdw[0] == 1 && gdw[1] == 2);
    check_weighted(g, 2, 2);
    FAILS(MPI_ERR_TOPOLOGY, MPI_Graph_neighbors_count(g, 0, &st));
    OK(MPI_Comm_free(&g));

    /* Unweighted and empty: nobody exchanges anything. */
    /* Through volatile pointers: GCC takes the sentinel addresses for
     * empty arrays and warns (-Wstringop-overread) at -O2. */
    int *volatile none = NULL, *volatile unweighted = MPI_UNWEIGHTED;
    int *volatile empty = MPI_WEIGHTS_EMPTY;
    OK(MPI_Dist_graph_create_adjacent(MPI_COMM_WORLD, 0, none, unweighted, 0, none, unweighted,
                                      MPI_INFO_NULL, 0, &g));
    int in, out, w, x = me, y = UNTOUCHED;
    OK(MPI_Dist_graph_neighbors_count(g, &in, &out, &w));
    CHECK(in == 0 && out == 0 && w == 0);
    OK(MPI_Neighbor_allgather(&x, 1, MPI_INT, &y, 1, MPI_INT, g));
    CHECK(y == UNTOUCHED);
    OK(MPI_Comm_free(&g));
    OK(MPI_Dist_graph_create_adjacent(MPI_COMM_WORLD, 0, none, empty, 0, none, empty,
                                      MPI_INFO_NULL, 0, &g));
    OK(MPI_Dist_graph_neighbors_count(g, &in, &out, &w));
    CHECK(in == 0 && out == 0 && w == 1);
    OK(MPI_Comm_free(&g));

    /* General: this process gives the edge me -> me+1 (weight 3) and the
     * edge me+1 -> me (weight 4), one of which another process is the
     * source of. */
    int gsrc[2] = {me, (me + 1) % n}, deg[2] = {1, 1}, gdst[2] = {(me + 1) % n, me};
    int wts[2] = {3, 4};
    OK(MPI_Dist_graph_create(MPI_COMM_WORLD, 2, gsrc, deg, gdst, wts, MPI_INFO_NULL, 0, &g));
    check_weighted(g, 2, 2);
    OK(MPI_Comm_free(&g));

    /* A rank outside the communicator. */
    srcs[0] = n;
    FAILS(MPI_ERR_RANK, MPI_Dist_graph_create_adjacent(MPI_COMM_WORLD, 2, srcs, sw, 2, dsts, dw,
                                                       MPI_INFO_NULL, 0, &g));
}

static void bad_arguments(void) {
    int dims[2] = {0, 2}, per[2] = {0, 0}, c[2], x = 0;
    MPI_Comm g;
    FAILS(MPI_ERR_DIMS, MPI_Cart_create(MPI_COMM_WORLD, 2, dims, per, 0, &g));
    dims[0] = n + 1;
    dims[1] = 1;
    FAILS(MPI_ERR_TOPOLOGY, MPI_Cart_create(MPI_COMM_WORLD, 2, dims, per, 0, &g));
    FAILS(MPI_ERR_TOPOLOGY, MPI_Cart_coords(MPI_COMM_WORLD, 0, 2, c));
    FAILS(MPI_ERR_TOPOLOGY, MPI_Neighbor_alltoall(&x, 1, MPI_INT, c, 1, MPI_INT, MPI_COMM_WORLD));
    FAILS(MPI_ERR_TOPOLOGY, MPI_Dist_graph_neighbors_count(MPI_COMM_WORLD, &x, &x, &x));
    int st;
    OK(MPI_Topo_test(MPI_COMM_WORLD, &st));
    CHECK(st == MPI_UNDEFINED);
}

int main(int argc, char **argv) {
    OK(MPI_Init(&argc, &argv));
    OK(MPI_Comm_rank(MPI_COMM_WORLD, &me));
    OK(MPI_Comm_size(MPI_COMM_WORLD, &n));
    check_rank = me;
    OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    /* MPI_Dims_create has no communicator: MPI_COMM_SELF's handler. */
    OK(MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN));
    dims_create();
    cartesian(1);
    cartesian(0);
    graph();
    dist_graph();
    bad_arguments();
    OK(MPI_Barrier(MPI_COMM_WORLD));
    PASSED("topology");
    return MPI_Finalize();
}
