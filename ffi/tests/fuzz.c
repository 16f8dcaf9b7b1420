/* A seeded fuzzer of random calls: routines among the implemented ones,
 * with random valid and invalid handles, ranks, tags, counts, datatypes
 * and buffers (NULL, small, unaligned), under MPI_ERRORS_RETURN. Every
 * call must return (an error class or success); a signal fails the run.
 *
 * Each rank follows its own random stream, so nothing may wait for a
 * peer: blocking calls get only MPI_PROC_NULL or invalid ranks, messages
 * to the peer are small enough to complete locally, synchronous sends and
 * collectives stay on this rank (MPI_COMM_SELF, self), and a buffer
 * reached by a call that could be valid always holds what the call can
 * touch (the library cannot check that; a program must).
 *
 * Besides point-to-point, datatypes, groups, communicators and operations:
 * windows on this rank alone (create, allocate, fence and lock epochs,
 * put, get, accumulate and the atomics with random displacements, counts
 * and types, free), topologies on this rank alone (Cartesian, graph and
 * distributed graphs with random, often bad, descriptions; their queries
 * and the neighbour collectives), info objects, intercommunicator routines
 * with arguments no intercommunicator can come from, attributes (keys of
 * every kind, predefined and freed ones), persistent and buffered sends.
 *
 * HMPI_FUZZ_SEED picks the stream (mixed with the rank), HMPI_FUZZ_CALLS
 * the number of calls per rank. Prints "fuzz: rank R: N calls". */
#include "check.h"
#include <stdint.h>
#include <string.h>

#define BUF_BYTES (1 << 20)
/* What a call that could be valid may reach from the buffer's start. */
#define REACH (BUF_BYTES / 2)
/* Bytes of a message to the peer: completes without the peer (eager). */
#define PEER_BYTES 256
#define POOL 32

static uint64_t state;
static uint64_t next(void) {
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    return state;
}
static int below(int n) { return (int)(next() % (uint64_t)n); }
static int chance(int percent) { return below(100) < percent; }

static _Alignas(64) unsigned char buf[BUF_BYTES], buf2[BUF_BYTES];
static int size, peer;
static MPI_Comm pair_comm;

static MPI_Datatype types[POOL];
static int ntypes;
static MPI_Request reqs[POOL];
static int nreqs, req_kind[POOL], last_kind;
static MPI_Comm comms[8];
static int ncomms;
static MPI_Group groups[8];
static int ngroups;
static MPI_Op ops[4];
static int nops;
static long calls;
static MPI_Win wins[4];
static int nwins;
static MPI_Info infos[4];
static int ninfos;
static int keys[6]; /* comm keys 0-1, type keys 2-3, window keys 4-5 */
static int nkeys[3];
/* Windows' memory (MPI_Win_create), and the buffered sends' buffer. */
static _Alignas(64) unsigned char win_mem[1 << 16], bsend_buf[1 << 16];
static int bsend_attached;
/* Objects made (HMPI_FUZZ_DEBUG prints them: the valid paths are taken). */
static long made_wins, made_topos, made_infos, made_keys, started;
/* Requests in the pool that are persistent (freed explicitly). */
#define KIND_PERSISTENT 1000
static void drain(MPI_Comm comm);

static void user_sum(void *in, void *inout, int *len, MPI_Datatype *t) {
    (void)t;
    if (*len > 0 && in != NULL && inout != NULL)
        ((unsigned char *)inout)[0] += ((unsigned char *)in)[0];
}

static void *garbage_handle(void) {
    /* Never a live handle of this run (that would be the program's own
     * bug): kinds with indices no table reaches, bits above an int, the
     * top bits of a finished receive's handle without its check. */
    static const uint64_t values[] = {0x4444,          0x7fffffff, 0xdeadbeef,
                                      0x1000,          0x3fffff0,  0x4fffff0,
                                      0xb400000000000000ull, 0xb4000000deadbeefull,
                                      0xffffffffffffffffull, 1};
    uint64_t v = values[below(sizeof values / sizeof values[0])];
    if (chance(30))
        v ^= (next() & 0xffffff) << 32;
    return (void *)(uintptr_t)v;
}

static MPI_Datatype any_type(void) {
    static const MPI_Datatype pre[] = {MPI_INT,  MPI_DOUBLE,     MPI_BYTE,     MPI_CHAR,
                                       MPI_SHORT_INT, MPI_DOUBLE_INT, MPI_UINT64_T, MPI_DATATYPE_NULL};
    int k = below(10);
    if (k < 5)
        return pre[below(sizeof pre / sizeof pre[0])];
    if (k < 8 && ntypes > 0)
        return types[below(ntypes)];
    return (MPI_Datatype)garbage_handle();
}

static MPI_Comm any_comm(void) {
    int k = below(10);
    if (k < 4)
        return MPI_COMM_SELF;
    if (k < 6)
        return MPI_COMM_WORLD;
    if (k < 8 && ncomms > 0)
        return comms[below(ncomms)];
    if (k < 9)
        return MPI_COMM_NULL;
    return (MPI_Comm)garbage_handle();
}

static int any_count(void) {
    static const int counts[] = {-1, 0, 1, 2, 7, 100, 4096, 1 << 20, INT32_MAX, -100000};
    return counts[below(sizeof counts / sizeof counts[0])];
}

static int any_tag(void) {
    static const int tags[] = {0, 1, 5, 77, -1, -5, MPI_ANY_TAG, 1 << 30, INT32_MAX, -100000};
    return tags[below(sizeof tags / sizeof tags[0])];
}

/* A rank for a call that must not wait for a peer. */
static int no_wait_rank(void) {
    static const int ranks[] = {MPI_PROC_NULL, -7, 99, 1 << 20, -100000, INT32_MAX};
    return ranks[below(sizeof ranks / sizeof ranks[0])];
}

static void *any_buf(unsigned char *base) {
    switch (below(5)) {
    case 0:
        return NULL;
    case 1:
        return base + 1; /* unaligned */
    case 2:
        return base + 3;
    default:
        return base;
    }
}

/* The count a call may use with `type` on a buffer: `count` when the
 * type is not valid or the elements stay within REACH bytes of the
 * buffer's start (and not before it), else 0 or a count that fits. */
static int fit(int count, MPI_Datatype type, int max_bytes) {
    MPI_Aint lb, extent, tlb, textent;
    int tsize;
    if (count <= 0)
        return count;
    if (MPI_Type_get_extent(type, &lb, &extent) != MPI_SUCCESS ||
        MPI_Type_get_true_extent(type, &tlb, &textent) != MPI_SUCCESS ||
        MPI_Type_size(type, &tsize) != MPI_SUCCESS)
        return count; /* invalid: the call must fail on the type */
    if (tlb < 0 || extent < 0 || tlb + textent > max_bytes)
        return 0;
    MPI_Aint step = extent > 0 ? extent : 1;
    MPI_Aint room = (max_bytes - tlb - textent) / step + 1;
    /* The message too (its bytes) stays within max_bytes. */
    if (tsize > 0 && room > max_bytes / tsize)
        room = max_bytes / tsize;
    if ((MPI_Aint)count > room)
        return (int)room;
    return count;
}

static void keep_request(MPI_Request r) {
    if (r == MPI_REQUEST_NULL)
        return;
    if (nreqs < POOL) {
        req_kind[nreqs] = last_kind;
        reqs[nreqs++] = r;
        return;
    }
    /* Full: cancel (a receive) and test the oldest until it finishes
     * (a synchronous send to this rank: once it is received). */
    MPI_Cancel(&reqs[0]);
    int flag = 0;
    while (!flag) {
        MPI_Test(&reqs[0], &flag, MPI_STATUS_IGNORE);
        if (!flag)
            drain(MPI_COMM_SELF);
    }
    if (reqs[0] != MPI_REQUEST_NULL)
        MPI_Request_free(&reqs[0]); /* an inactive persistent request */
    req_kind[0] = last_kind;
    reqs[0] = r;
}

static void make_type(void) {
    MPI_Datatype old = any_type(), t = MPI_DATATYPE_NULL;
    int count = any_count(), bl = below(4) - 1, stride = below(9) - 2, rc;
    int bls[4] = {1, 2, bl, 3}, displs[4] = {0, 3, 8, below(100) - 10};
    MPI_Aint adispls[4] = {0, 8, 16, (MPI_Aint)below(1000) - 100};
    MPI_Datatype ts[4] = {MPI_INT, old, MPI_DOUBLE, any_type()};
    int n = below(6) - 1;
    switch (below(8)) {
    case 0: rc = MPI_Type_contiguous(count, old, &t); break;
    case 1: rc = MPI_Type_vector(count, bl, stride, old, &t); break;
    case 2: rc = MPI_Type_create_hvector(count, bl, (MPI_Aint)stride * 8, old, &t); break;
    case 3: rc = MPI_Type_indexed(n, chance(10) ? NULL : bls, displs, old, &t); break;
    case 4: rc = MPI_Type_create_hindexed(n, bls, chance(10) ? NULL : adispls, old, &t); break;
    case 5: rc = MPI_Type_create_struct(n, bls, adispls, chance(10) ? NULL : ts, &t); break;
    case 6: rc = MPI_Type_create_resized(old, (MPI_Aint)below(64) - 16, (MPI_Aint)below(64) - 8, &t); break;
    default: rc = MPI_Type_dup(old, &t); break;
    }
    calls++;
    if (rc == MPI_SUCCESS) {
        CHECK(t != MPI_DATATYPE_NULL);
        if (chance(80)) {
            MPI_Type_commit(&t);
            calls++;
        }
        if (ntypes < POOL)
            types[ntypes++] = t;
        else {
            MPI_Type_free(&types[0]);
            types[0] = t;
        }
    }
}

/* A communicator of this rank alone (or a bad one): what a collective
 * creation may be called on without waiting for a peer. */
static MPI_Comm self_comm(void) {
    int k = below(10);
    if (k < 5)
        return MPI_COMM_SELF;
    if (k < 8 && ncomms > 0)
        return comms[below(ncomms)];
    if (k < 9)
        return MPI_COMM_NULL;
    return (MPI_Comm)garbage_handle();
}

static void keep_comm(MPI_Comm c) {
    if (c == MPI_COMM_NULL)
        return;
    int kind = MPI_UNDEFINED;
    if (MPI_Topo_test(c, &kind) == MPI_SUCCESS && kind != MPI_UNDEFINED)
        made_topos++;
    if (ncomms < 8)
        comms[ncomms++] = c;
    else
        MPI_Comm_free(&c);
}

static MPI_Win any_win(void) {
    int k = below(10);
    if (k < 7 && nwins > 0)
        return wins[below(nwins)];
    if (k < 8)
        return MPI_WIN_NULL;
    return (MPI_Win)garbage_handle();
}

static MPI_Info any_info(void) {
    int k = below(10);
    if (k < 4)
        return MPI_INFO_NULL;
    if (k < 8 && ninfos > 0)
        return infos[below(ninfos)];
    if (k < 9)
        return MPI_INFO_ENV;
    return (MPI_Info)garbage_handle();
}

static MPI_Op any_op(void) {
    static const MPI_Op pre[] = {MPI_SUM, MPI_REPLACE, MPI_NO_OP, MPI_MAX, MPI_BAND, MPI_OP_NULL};
    if (chance(80))
        return pre[below(sizeof pre / sizeof pre[0])];
    if (nops > 0 && chance(50))
        return ops[below(nops)];
    return (MPI_Op)garbage_handle();
}

static MPI_Aint any_disp(void) {
    static const MPI_Aint d[] = {0, 0, 1, 3, 100, 4096, -1, -4096, (MPI_Aint)1 << 40, INT64_MAX, INT64_MIN};
    return d[below(sizeof d / sizeof d[0])];
}

static int any_key(int kind) {
    int k = below(10);
    if (k < 6 && nkeys[kind] > 0)
        return keys[2 * kind + below(nkeys[kind])];
    static const int bad[] = {MPI_KEYVAL_INVALID, 0x4444, -5, 0x7fffffff, MPI_TAG_UB, MPI_WTIME_IS_GLOBAL,
                              MPI_WIN_BASE, MPI_WIN_SIZE};
    return bad[below(sizeof bad / sizeof bad[0])];
}

static const char *any_key_text(void) {
    static char long_key[400];
    if (long_key[0] == 0)
        memset(long_key, 'k', sizeof long_key - 1);
    static const char *keys_[] = {"a", "b", "no_locks", "", "accumulate_ordering", NULL};
    if (chance(10))
        return long_key;
    return keys_[below(sizeof keys_ / sizeof keys_[0])];
}

/* Windows on this rank alone: create, allocate, epochs, free. */
static void window_call(void) {
    MPI_Win w = any_win();
    int x, flag;
    switch (below(9)) {
    case 0: case 1: { /* create or allocate */
        static const MPI_Aint sizes[] = {0, 8, 100, 4096, 1 << 16, -1, (MPI_Aint)1 << 50};
        static const int units[] = {1, 4, 8, 0, -3, 1 << 20};
        MPI_Aint sz = sizes[below(sizeof sizes / sizeof sizes[0])];
        int unit = units[below(sizeof units / sizeof units[0])];
        MPI_Win made = MPI_WIN_NULL;
        int rc;
        if (below(2)) {
            /* Win_create exposes win_mem: never more than it holds. */
            if (sz > (MPI_Aint)sizeof win_mem)
                sz = chance(50) ? (MPI_Aint)sizeof win_mem : -5;
            rc = MPI_Win_create(chance(10) ? NULL : win_mem, sz, unit, any_info(), self_comm(), &made);
        } else {
            void *base = NULL;
            if (sz > (1 << 20))
                sz = chance(50) ? (MPI_Aint)1 << 20 : sz; /* too big: an error */
            rc = MPI_Win_allocate(sz, unit, any_info(), self_comm(), chance(10) ? NULL : &base, &made);
        }
        if (rc == MPI_SUCCESS && made != MPI_WIN_NULL) {
            made_wins++;
            MPI_Win_set_errhandler(made, MPI_ERRORS_RETURN);
            if (nwins < 4)
                wins[nwins++] = made;
            else
                MPI_Win_free(&made);
        }
        break;
    }
    case 2: { /* free */
        int i = nwins > 0 && chance(80) ? below(nwins) : -1;
        /* Not a pooled one behind the pool's back. */
        MPI_Win f = i >= 0 ? wins[i] : chance(50) ? MPI_WIN_NULL : (MPI_Win)garbage_handle();
        if (MPI_Win_free(&f) == MPI_SUCCESS && i >= 0)
            wins[i] = wins[--nwins];
        break;
    }
    case 3: { /* epochs */
        static const int asserts[] = {0, MPI_MODE_NOPRECEDE, MPI_MODE_NOSUCCEED, MPI_MODE_NOCHECK, -1, 1 << 20};
        int a = asserts[below(sizeof asserts / sizeof asserts[0])];
        int rank = chance(70) ? 0 : no_wait_rank();
        int type = chance(45) ? MPI_LOCK_SHARED : chance(80) ? MPI_LOCK_EXCLUSIVE : below(10) - 3;
        switch (below(8)) {
        case 0: MPI_Win_fence(a, w); break;
        case 1: MPI_Win_lock(type, rank, a, w); break;
        case 2: MPI_Win_unlock(rank, w); break;
        case 3: MPI_Win_lock_all(a, w); break;
        case 4: MPI_Win_unlock_all(w); break;
        case 5: MPI_Win_flush(rank, w); break;
        case 6: MPI_Win_flush_local_all(w); break;
        default: MPI_Win_sync(w); break;
        }
        break;
    }
    default: { /* communication: origin buffers within REACH */
        MPI_Datatype t = any_type(), tt = any_type();
        int count = fit(any_count(), t, REACH / 2), tcount = any_count();
        int rank = chance(80) ? 0 : no_wait_rank();
        MPI_Aint disp = any_disp();
        MPI_Request r = MPI_REQUEST_NULL;
        switch (below(9)) {
        case 0: MPI_Put(any_buf(buf), count, t, rank, disp, tcount, tt, w); break;
        case 1: MPI_Get(any_buf(buf2), count, t, rank, disp, tcount, tt, w); break;
        case 2: MPI_Accumulate(any_buf(buf), count, t, rank, disp, tcount, tt, any_op(), w); break;
        case 3:
            MPI_Get_accumulate(any_buf(buf), count, t, any_buf(buf2), fit(any_count(), tt, REACH / 2), tt, rank,
                               disp, tcount, tt, any_op(), w);
            break;
        case 4: MPI_Fetch_and_op(any_buf(buf), any_buf(buf2), t, rank, disp, any_op(), w); break;
        case 5: MPI_Compare_and_swap(any_buf(buf), any_buf(buf + 64), any_buf(buf2), t, rank, disp, w); break;
        case 6: MPI_Rput(any_buf(buf), count, t, rank, disp, tcount, tt, w, &r); break;
        case 7: MPI_Rget(any_buf(buf2), count, t, rank, disp, tcount, tt, w, &r); break;
        default: {
            MPI_Group g;
            void *val;
            if (MPI_Win_get_group(w, &g) == MPI_SUCCESS)
                MPI_Group_free(&g);
            MPI_Win_get_attr(w, any_key(2), &val, &flag);
            MPI_Win_set_info(w, any_info());
            x = 0;
            break;
        }
        }
        keep_request(r);
        break;
    }
    }
    (void)x;
}

/* Topologies on this rank alone, their queries, neighbour collectives. */
static void topology_call(void) {
    int dims[8], periods[8], coords[8], arr[8], arr2[8], w1[8], w2[8], x, y, z;
    static const int dim_values[] = {1, 1, 1, 0, -1, 2, 3};
    for (int i = 0; i < 8; i++) {
        dims[i] = dim_values[below(sizeof dim_values / sizeof dim_values[0])];
        periods[i] = below(3) - 1 + (chance(80) ? 1 : 0);
        arr[i] = chance(85) ? 0 : no_wait_rank();
        arr2[i] = below(4) - 1;
        w1[i] = below(5) - 1;
        w2[i] = below(5);
    }
    int n = below(6) - 1;
    MPI_Comm c = MPI_COMM_NULL, any = any_comm();
    switch (below(10)) {
    case 0: MPI_Cart_create(self_comm(), n, chance(10) ? NULL : dims, periods, below(2), &c); keep_comm(c); break;
    case 1: {
        int index[3] = {1, 2, 2}, edges[3] = {0, 0, arr[0]};
        if (chance(20))
            index[0] = below(5) - 1;
        MPI_Graph_create(self_comm(), n, index, chance(10) ? NULL : edges, below(2), &c);
        keep_comm(c);
        break;
    }
    case 2: {
        int indeg = below(4) - 1, outdeg = below(4) - 1;
        const int *sw = chance(40) ? MPI_UNWEIGHTED : chance(20) ? MPI_WEIGHTS_EMPTY : w1;
        const int *dw = sw == w1 ? w2 : sw;
        MPI_Dist_graph_create_adjacent(self_comm(), indeg, arr, sw, outdeg, arr, dw, any_info(), below(2), &c);
        keep_comm(c);
        break;
    }
    case 3: {
        int degrees[3] = {below(3), below(4) - 1, 1};
        MPI_Dist_graph_create(self_comm(), below(4) - 1, arr, degrees, arr, chance(50) ? MPI_UNWEIGHTED : w2,
                              any_info(), below(2), &c);
        keep_comm(c);
        break;
    }
    case 4: /* queries of any communicator */
        switch (below(8)) {
        case 0: MPI_Cart_coords(any, below(3) - 1, below(10) - 1, coords); break;
        case 1: MPI_Cart_rank(any, coords, &x); break;
        case 2: MPI_Cart_shift(any, below(4) - 1, below(7) - 3, &x, &y); break;
        case 3: MPI_Cart_get(any, below(10) - 1, dims, periods, coords); break;
        case 4: MPI_Graph_neighbors(any, below(3) - 1, below(10) - 1, arr); break;
        case 5: MPI_Graph_get(any, below(10) - 1, below(10) - 1, arr, arr2); break;
        case 6: MPI_Dist_graph_neighbors(any, below(10) - 1, arr, w1, below(10) - 1, arr2, w2); break;
        default: MPI_Dist_graph_neighbors_count(any, &x, &y, &z); break;
        }
        break;
    case 5:
        MPI_Topo_test(any, &x);
        MPI_Cartdim_get(any, &x);
        MPI_Graphdims_get(any, &x, &y);
        MPI_Graph_neighbors_count(any, below(3) - 1, &x);
        calls += 3;
        break;
    case 6: {
        int remain[8];
        for (int i = 0; i < 8; i++)
            remain[i] = below(2);
        MPI_Cart_sub(any, chance(10) ? NULL : remain, &c);
        keep_comm(c);
        break;
    }
    case 7: {
        static const int nnodes[] = {0, 1, 6, 12, -1, INT32_MAX, 1 << 20};
        MPI_Dims_create(nnodes[below(sizeof nnodes / sizeof nnodes[0])], below(10) - 1, chance(10) ? NULL : dims);
        MPI_Cart_map(self_comm(), n, dims, periods, &x);
        MPI_Graph_map(self_comm(), n, arr2, arr, &x);
        calls += 2;
        break;
    }
    default: { /* neighbour collectives on a topology of this rank alone */
        MPI_Comm on = ncomms > 0 && chance(80) ? comms[below(ncomms)] : self_comm();
        MPI_Datatype t = any_type(), t2 = any_type();
        /* At most six neighbours: everything stays within REACH. */
        int count = fit(any_count(), t, REACH / 8), count2 = fit(any_count(), t2, REACH / 8);
        int counts[8], displs[8];
        for (int i = 0; i < 8; i++) {
            counts[i] = chance(90) ? count2 : any_count();
            displs[i] = 0;
        }
        MPI_Request r = MPI_REQUEST_NULL;
        switch (below(5)) {
        case 0: MPI_Neighbor_allgather(any_buf(buf), count, t, any_buf(buf2), count2, t2, on); break;
        case 1: MPI_Neighbor_alltoall(any_buf(buf), count, t, any_buf(buf2), count2, t2, on); break;
        case 2: MPI_Neighbor_allgatherv(any_buf(buf), count, t, any_buf(buf2), counts, displs, t2, on); break;
        case 3: MPI_Ineighbor_allgather(any_buf(buf), count, t, any_buf(buf2), count2, t2, on, &r); break;
        default: MPI_Ineighbor_alltoall(any_buf(buf), count, t, any_buf(buf2), count2, t2, on, &r); break;
        }
        if (r != MPI_REQUEST_NULL)
            MPI_Wait(&r, MPI_STATUS_IGNORE); /* this rank alone: it finishes */
        break;
    }
    }
}

static void info_call(void) {
    MPI_Info info = any_info();
    char value[65], key[MPI_MAX_INFO_KEY + 1];
    int flag, x, len;
    switch (below(8)) {
    case 0: {
        MPI_Info made;
        int rc = below(3) ? MPI_Info_create(&made) : MPI_Info_dup(info, &made);
        if (rc == MPI_SUCCESS) {
            made_infos++;
            if (ninfos < 4)
                infos[ninfos++] = made;
            else
                MPI_Info_free(&made);
        }
        break;
    }
    case 1: {
        int i = ninfos > 0 && chance(80) ? below(ninfos) : -1;
        MPI_Info f = i >= 0 ? infos[i] : chance(50) ? MPI_INFO_NULL : (MPI_Info)garbage_handle();
        if (MPI_Info_free(&f) == MPI_SUCCESS && i >= 0)
            infos[i] = infos[--ninfos];
        break;
    }
    case 2: {
        static char long_value[5000];
        if (long_value[0] == 0)
            memset(long_value, 'v', sizeof long_value - 1);
        const char *v = chance(10) ? NULL : chance(10) ? long_value : chance(50) ? "true" : "x";
        MPI_Info_set(info, any_key_text(), v);
        break;
    }
    case 3:
        len = below(66) - 1; /* at most the 65 bytes of `value` */
        MPI_Info_get_string(info, any_key_text(), chance(10) ? NULL : &len, value, &flag);
        break;
    case 4:
        MPI_Info_get(info, any_key_text(), below(65) - 1, value, &flag); /* writes valuelen + 1 */
        MPI_Info_get_valuelen(info, any_key_text(), &len, &flag);
        calls++;
        break;
    case 5:
        MPI_Info_get_nkeys(info, &x);
        MPI_Info_get_nthkey(info, below(6) - 1, key);
        MPI_Info_delete(info, any_key_text());
        calls += 2;
        break;
    case 6: {
        MPI_Comm c = MPI_COMM_NULL;
        MPI_Comm_dup_with_info(self_comm(), info, &c);
        keep_comm(c);
        MPI_Comm_set_info(any_comm(), info);
        calls++;
        break;
    }
    default: {
        MPI_Info got = MPI_INFO_NULL;
        if (MPI_Comm_get_info(any_comm(), &got) == MPI_SUCCESS)
            MPI_Info_free(&got);
        break;
    }
    }
}

/* Intercommunicator routines, with arguments no intercommunicator can
 * come from (a valid one would wait for the peer). */
static void intercomm_call(void) {
    MPI_Comm c = MPI_COMM_NULL;
    MPI_Group g;
    int x;
    static const int bad_ranks[] = {-7, 99, 1 << 20, -100000, INT32_MAX};
    int remote = bad_ranks[below(sizeof bad_ranks / sizeof bad_ranks[0])];
    switch (below(4)) {
    case 0:
        MPI_Intercomm_create(self_comm(), chance(80) ? 0 : below(5) - 2, any_comm(), remote, any_tag(), &c);
        keep_comm(c);
        break;
    case 1:
        MPI_Intercomm_merge(any_comm(), below(3) - 1, &c);
        keep_comm(c);
        break;
    case 2:
        MPI_Comm_remote_size(any_comm(), &x);
        if (MPI_Comm_remote_group(any_comm(), &g) == MPI_SUCCESS)
            MPI_Group_free(&g);
        calls++;
        break;
    default:
        MPI_Comm_test_inter(any_comm(), chance(10) ? NULL : &x);
        break;
    }
}

static int delete_calls;
static int count_delete(MPI_Comm c, int key, void *val, void *extra) {
    (void)c, (void)key, (void)val, (void)extra;
    delete_calls++;
    return MPI_SUCCESS;
}

static void attribute_call(void) {
    int flag, kind = below(3);
    void *val;
    static int value = 42;
    switch (below(5)) {
    case 0: { /* a key */
        int k = MPI_KEYVAL_INVALID, rc;
        if (kind == 0)
            rc = MPI_Comm_create_keyval(chance(50) ? MPI_COMM_DUP_FN : MPI_COMM_NULL_COPY_FN,
                                        chance(50) ? count_delete : MPI_COMM_NULL_DELETE_FN, &k, NULL);
        else if (kind == 1)
            rc = MPI_Type_create_keyval(chance(50) ? MPI_TYPE_DUP_FN : MPI_TYPE_NULL_COPY_FN, MPI_TYPE_NULL_DELETE_FN,
                                        &k, NULL);
        else
            rc = MPI_Win_create_keyval(chance(50) ? MPI_WIN_DUP_FN : MPI_WIN_NULL_COPY_FN, MPI_WIN_NULL_DELETE_FN, &k,
                                       NULL);
        if (rc == MPI_SUCCESS) {
            made_keys++;
            if (nkeys[kind] < 2)
                keys[2 * kind + nkeys[kind]++] = k;
            else if (kind == 0)
                MPI_Comm_free_keyval(&k);
            else if (kind == 1)
                MPI_Type_free_keyval(&k);
            else
                MPI_Win_free_keyval(&k);
        }
        break;
    }
    case 1: { /* free a key (of any kind, with any routine) */
        int i = nkeys[kind] > 0 && chance(70) ? below(nkeys[kind]) : -1;
        int k = i >= 0 ? keys[2 * kind + i] : (int)(uintptr_t)garbage_handle(), rc;
        switch (below(3)) {
        case 0: rc = MPI_Comm_free_keyval(&k); break;
        case 1: rc = MPI_Type_free_keyval(&k); break;
        default: rc = MPI_Win_free_keyval(&k); break;
        }
        if (rc == MPI_SUCCESS && i >= 0 && k == MPI_KEYVAL_INVALID) {
            keys[2 * kind + i] = keys[2 * kind + nkeys[kind] - 1];
            nkeys[kind]--;
        }
        break;
    }
    case 2: /* set */
        switch (kind) {
        case 0: MPI_Comm_set_attr(any_comm(), any_key(below(3)), &value); break;
        case 1: MPI_Type_set_attr(any_type(), any_key(below(3)), &value); break;
        default: MPI_Win_set_attr(any_win(), any_key(below(3)), &value); break;
        }
        break;
    case 3: /* get */
        switch (kind) {
        case 0: MPI_Comm_get_attr(any_comm(), any_key(below(3)), chance(10) ? NULL : &val, &flag); break;
        case 1: MPI_Type_get_attr(any_type(), any_key(below(3)), &val, chance(10) ? NULL : &flag); break;
        default: MPI_Win_get_attr(any_win(), any_key(below(3)), &val, &flag); break;
        }
        break;
    default: /* delete */
        switch (kind) {
        case 0: MPI_Comm_delete_attr(any_comm(), any_key(below(3))); break;
        case 1: MPI_Type_delete_attr(any_type(), any_key(below(3))); break;
        default: MPI_Win_delete_attr(any_win(), any_key(below(3))); break;
        }
        break;
    }
}

/* Persistent and buffered sends: to the peer small enough to complete
 * alone, synchronous ones to this rank only (received by a drain). */
static void persistent_call(void) {
    MPI_Datatype t = any_type();
    MPI_Request r = MPI_REQUEST_NULL;
    int to_peer = chance(50);
    int count = fit(any_count(), t, PEER_BYTES);
    int dest = to_peer ? (chance(80) ? peer : no_wait_rank()) : 0;
    MPI_Comm comm = to_peer ? (chance(90) ? MPI_COMM_WORLD : any_comm()) : MPI_COMM_SELF;
    int tag = below(5), rc = MPI_ERR_OTHER;
    switch (below(9)) {
    case 0: rc = MPI_Send_init(any_buf(buf), count, t, dest, tag, comm, &r); break;
    case 1: rc = MPI_Ssend_init(any_buf(buf), count, t, 0, tag, MPI_COMM_SELF, &r); break;
    case 2: rc = MPI_Rsend_init(any_buf(buf), count, t, dest, tag, comm, &r); break;
    case 3: rc = MPI_Bsend_init(any_buf(buf), count, t, dest, tag, comm, &r); break;
    case 4: {
        int src = chance(50) ? MPI_ANY_SOURCE : chance(50) ? peer : no_wait_rank();
        rc = MPI_Recv_init(any_buf(buf2), fit(any_count(), t, REACH), t, src, any_tag(),
                           chance(80) ? MPI_COMM_WORLD : any_comm(), &r);
        break;
    }
    case 5: /* start what the pool holds (most are not persistent) */
        if (nreqs > 0) {
            int i = below(nreqs);
            if (chance(50))
                MPI_Start(&reqs[i]);
            else
                MPI_Startall(below(nreqs + 1), reqs);
        } else {
            MPI_Request g = (MPI_Request)garbage_handle();
            MPI_Start(&g);
        }
        return;
    case 6: /* free one of the pool */
        if (nreqs > 0) {
            int i = below(nreqs);
            MPI_Cancel(&reqs[i]);
            if (MPI_Request_free(&reqs[i]) == MPI_SUCCESS) {
                reqs[i] = reqs[--nreqs];
                req_kind[i] = req_kind[nreqs];
            }
        }
        return;
    case 7: { /* attach or detach the buffer */
        if (!bsend_attached) {
            static const int sizes[] = {0, 100, 600, 4096, 1 << 16, -1};
            int sz = sizes[below(sizeof sizes / sizeof sizes[0])];
            if (MPI_Buffer_attach(chance(10) ? NULL : bsend_buf, sz) == MPI_SUCCESS)
                bsend_attached = 1;
        } else {
            void *addr;
            int sz;
            if (MPI_Buffer_detach(&addr, chance(10) ? NULL : &sz) == MPI_SUCCESS)
                bsend_attached = 0;
        }
        return;
    }
    default:
        if (chance(50))
            MPI_Bsend(any_buf(buf), count, t, dest, tag, comm);
        else {
            rc = MPI_Ibsend(any_buf(buf), count, t, dest, tag, comm, &r);
            keep_request(r);
        }
        return;
    }
    if (rc == MPI_SUCCESS && r != MPI_REQUEST_NULL) {
        last_kind = KIND_PERSISTENT;
        if (chance(70) && MPI_Start(&r) == MPI_SUCCESS)
            started++;
        keep_request(r);
    }
}

static void one_call(void) {
    MPI_Status st;
    MPI_Request r = MPI_REQUEST_NULL;
    int flag, x, n;
    MPI_Aint a, b;
    calls++;
    switch (last_kind = below(42)) {
    case 0:
    case 1:
        make_type();
        break;
    case 2: {
        MPI_Datatype t = chance(70) && ntypes > 0 ? types[below(ntypes)] : any_type();
        int i = -1;
        for (int k = 0; k < ntypes; k++)
            if (types[k] == t)
                i = k;
        if (MPI_Type_free(&t) == MPI_SUCCESS && i >= 0)
            types[i] = types[--ntypes];
        break;
    }
    case 3:
        MPI_Type_size(any_type(), chance(10) ? NULL : &x);
        MPI_Type_get_extent(any_type(), &a, chance(10) ? NULL : &b);
        calls++;
        break;
    case 4: { /* a send to the peer, small enough to complete alone */
        MPI_Datatype t = any_type();
        int count = fit(any_count(), t, PEER_BYTES);
        int dest = chance(70) ? peer : no_wait_rank();
        MPI_Isend(any_buf(buf), count, t, dest, any_tag(), chance(80) ? MPI_COMM_WORLD : any_comm(), &r);
        keep_request(r);
        break;
    }
    case 5: { /* a receive from anyone, tested later */
        MPI_Datatype t = any_type();
        int count = fit(any_count(), t, REACH);
        int src = chance(50) ? MPI_ANY_SOURCE : chance(50) ? peer : no_wait_rank();
        MPI_Irecv(any_buf(buf2), count, t, src, any_tag(), chance(80) ? MPI_COMM_WORLD : any_comm(), &r);
        keep_request(r);
        break;
    }
    case 6: { /* to and from this rank */
        MPI_Datatype t = any_type(), t2 = any_type();
        int count = fit(any_count(), t, REACH), count2 = fit(any_count(), t2, REACH);
        /* On a communicator of its own: no other message or receive may
         * take the place of the pair. */
        int tag = chance(90) ? 9 : any_tag();
        MPI_Sendrecv(any_buf(buf), count, t, 0, tag, any_buf(buf2), count2, t2, 0, tag,
                     pair_comm, chance(50) ? MPI_STATUS_IGNORE : &st);
        break;
    }
    case 7: { /* blocking calls that must not wait */
        MPI_Datatype t = any_type();
        int count = fit(any_count(), t, REACH);
        switch (below(5)) {
        case 0: MPI_Send(any_buf(buf), count, t, no_wait_rank(), any_tag(), any_comm()); break;
        case 1: MPI_Ssend(any_buf(buf), count, t, no_wait_rank(), any_tag(), any_comm()); break;
        case 2: MPI_Recv(any_buf(buf2), count, t, no_wait_rank(), any_tag(), any_comm(), &st); break;
        case 3: MPI_Probe(no_wait_rank(), any_tag(), any_comm(), &st); break;
        default: MPI_Sendrecv_replace(any_buf(buf2), count, t, no_wait_rank(), any_tag(), no_wait_rank(), any_tag(), any_comm(), &st); break;
        }
        break;
    }
    case 8:
        MPI_Iprobe(chance(50) ? MPI_ANY_SOURCE : below(size + 2) - 1, any_tag(), any_comm(), &flag,
                   chance(50) ? &st : MPI_STATUS_IGNORE);
        break;
    case 9:
    case 10:
        if (nreqs > 0) {
            int i = below(nreqs);
            if (MPI_Test(&reqs[i], &flag, &st) == MPI_SUCCESS && reqs[i] == MPI_REQUEST_NULL)
                { reqs[i] = reqs[--nreqs]; req_kind[i] = req_kind[nreqs]; }
        }
        break;
    case 11:
        if (nreqs > 0) {
            MPI_Request copy[POOL];
            memcpy(copy, reqs, sizeof reqs);
            n = below(nreqs + 1);
            switch (below(3)) {
            case 0: MPI_Testall(n, copy, &flag, MPI_STATUSES_IGNORE); break;
            case 1: MPI_Testany(n, copy, &x, &flag, &st); break;
            default: {
                int idx[POOL];
                MPI_Testsome(n, copy, &x, idx, MPI_STATUSES_IGNORE);
            }
            }
            /* Keep the pool to what is still pending. */
            int kept = 0;
            for (int i = 0; i < nreqs; i++)
                if (copy[i] != MPI_REQUEST_NULL) {
                    req_kind[kept] = req_kind[i];
                    reqs[kept++] = copy[i];
                }
            nreqs = kept;
        }
        break;
    case 12:
        if (nreqs > 0)
            MPI_Cancel(&reqs[below(nreqs)]);
        break;
    case 13: { /* garbage requests everywhere */
        MPI_Request g = (MPI_Request)garbage_handle();
        switch (below(5)) {
        case 0: MPI_Wait(&g, &st); break;
        case 1: MPI_Test(&g, &flag, &st); break;
        case 2: MPI_Request_free(&g); break;
        case 3: MPI_Cancel(&g); break;
        default: {
            MPI_Request two[2] = {MPI_REQUEST_NULL, g};
            MPI_Waitall(2, two, MPI_STATUSES_IGNORE);
        }
        }
        break;
    }
    case 14:
        MPI_Comm_rank(any_comm(), chance(10) ? NULL : &x);
        MPI_Comm_size(any_comm(), &x);
        calls++;
        break;
    case 15: { /* communicators of this rank alone */
        MPI_Comm c = MPI_COMM_NULL;
        int rc = below(2) ? MPI_Comm_dup(chance(80) ? MPI_COMM_SELF : (MPI_Comm)garbage_handle(), &c)
                          : MPI_Comm_split(MPI_COMM_SELF, below(3) - 1, below(5), &c);
        if (rc == MPI_SUCCESS && c != MPI_COMM_NULL) {
            if (ncomms < 8)
                comms[ncomms++] = c;
            else
                MPI_Comm_free(&c);
        }
        break;
    }
    case 16:
        if (ncomms > 0 && chance(50)) {
            int i = below(ncomms);
            if (MPI_Comm_free(&comms[i]) == MPI_SUCCESS)
                comms[i] = comms[--ncomms];
        } else {
            MPI_Comm c = any_comm();
            MPI_Comm_free(&c);
        }
        break;
    case 17:
        MPI_Comm_compare(any_comm(), any_comm(), &x);
        break;
    case 18: {
        MPI_Group g = MPI_GROUP_NULL;
        int ranks[3] = {0, below(4) - 1, below(3)};
        int ranges[1][3] = {{0, below(4) - 1, below(3) - 1}};
        MPI_Group from = ngroups > 0 && chance(70) ? groups[below(ngroups)]
                         : chance(50) ? MPI_GROUP_EMPTY : (MPI_Group)garbage_handle();
        int rc;
        switch (below(6)) {
        case 0: rc = MPI_Comm_group(any_comm(), &g); break;
        case 1: rc = MPI_Group_incl(from, below(4) - 1, ranks, &g); break;
        case 2: rc = MPI_Group_excl(from, below(4) - 1, ranks, &g); break;
        case 3: rc = MPI_Group_range_incl(from, below(3) - 1, ranges, &g); break;
        case 4: rc = MPI_Group_union(from, from, &g); break;
        default: rc = MPI_Group_translate_ranks(from, below(4) - 1, ranks, from, ranks); break;
        }
        if (rc == MPI_SUCCESS && g != MPI_GROUP_NULL && g != MPI_GROUP_EMPTY) {
            if (ngroups < 8)
                groups[ngroups++] = g;
            else
                MPI_Group_free(&g);
        }
        MPI_Group_size(from, &x);
        break;
    }
    case 19:
        if (ngroups > 0) {
            int i = below(ngroups);
            if (MPI_Group_free(&groups[i]) == MPI_SUCCESS)
                groups[i] = groups[--ngroups];
        }
        break;
    case 20: { /* collectives of this rank alone */
        MPI_Datatype t = any_type();
        int count = fit(any_count(), t, REACH);
        MPI_Op op = chance(70) ? MPI_SUM : nops > 0 && chance(50) ? ops[below(nops)] : (MPI_Op)garbage_handle();
        switch (below(4)) {
        case 0: MPI_Allreduce(any_buf(buf), any_buf(buf2), count, t, op, MPI_COMM_SELF); break;
        case 1: MPI_Bcast(any_buf(buf2), count, t, below(3) - 1, MPI_COMM_SELF); break;
        case 2: MPI_Barrier(chance(50) ? MPI_COMM_SELF : (MPI_Comm)garbage_handle()); break;
        default: MPI_Reduce_local(any_buf(buf), any_buf(buf2), count, t, op); break;
        }
        break;
    }
    case 21:
        if (nops < 4 && chance(50)) {
            MPI_Op op;
            if (MPI_Op_create(chance(90) ? user_sum : NULL, below(2), &op) == MPI_SUCCESS)
                ops[nops++] = op;
        } else if (nops > 0) {
            int i = below(nops);
            if (MPI_Op_free(&ops[i]) == MPI_SUCCESS)
                ops[i] = ops[--nops];
        } else {
            MPI_Op g = (MPI_Op)garbage_handle();
            MPI_Op_free(&g);
        }
        break;
    case 22: {
        char text[MPI_MAX_ERROR_STRING];
        int code = below(3) ? below(70) - 3 : (int)next();
        MPI_Error_string(code, text, &x);
        MPI_Error_class(code, &x);
        calls++;
        break;
    }
    case 23: {
        MPI_Errhandler h = chance(50) ? MPI_ERRORS_RETURN : (MPI_Errhandler)garbage_handle();
        MPI_Comm c = chance(50) ? MPI_COMM_SELF : any_comm();
        /* Never leave a fatal handler behind. */
        if (MPI_Comm_set_errhandler(c, h) == MPI_SUCCESS && h != MPI_ERRORS_RETURN)
            MPI_Comm_set_errhandler(c, MPI_ERRORS_RETURN);
        MPI_Comm_get_errhandler(any_comm(), &h);
        break;
    }
    case 24: {
        MPI_Datatype t = any_type();
        int count = fit(any_count(), t, REACH / 2), pos = below(3) ? 0 : below(100) - 10;
        int outsize = below(2) ? REACH / 2 : any_count();
        if (outsize > REACH / 2)
            outsize = REACH / 2;
        if (below(2))
            MPI_Pack(any_buf(buf), count, t, any_buf(buf2), outsize, &pos, MPI_COMM_SELF);
        else
            MPI_Unpack(any_buf(buf2), outsize, &pos, any_buf(buf), count, t, MPI_COMM_SELF);
        MPI_Pack_size(any_count(), any_type(), any_comm(), &x);
        calls++;
        break;
    }
    case 25:
        memset(&st, 0, sizeof st);
        MPI_Status_set_tag(&st, any_tag());
        MPI_Get_count(chance(10) ? NULL : &st, any_type(), &x);
        break;
    case 26: { /* a message improbed from this rank */
        MPI_Message m = MPI_MESSAGE_NULL;
        if (MPI_Improbe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_SELF, &flag, &m, &st) == MPI_SUCCESS && flag) {
            MPI_Mrecv(buf2, REACH, MPI_BYTE, &m, &st);
            calls++;
        } else {
            MPI_Message g = (MPI_Message)garbage_handle();
            MPI_Mrecv(buf2, 1, MPI_INT, &g, &st);
        }
        break;
    }
    case 27: { /* a send to this rank, received later by a receive or a drain */
        MPI_Datatype t = any_type();
        int count = fit(any_count(), t, PEER_BYTES);
        MPI_Isend(any_buf(buf), count, t, 0, below(5), MPI_COMM_SELF, &r);
        keep_request(r);
        break;
    }
    case 28:
        MPI_Comm_set_name(any_comm(), chance(10) ? NULL : "fuzzed");
        break;
    case 30: case 31: case 32:
        window_call();
        break;
    case 33: case 34:
        topology_call();
        break;
    case 35:
        info_call();
        break;
    case 36:
        intercomm_call();
        break;
    case 37: case 38:
        attribute_call();
        break;
    case 39: case 40:
        persistent_call();
        break;
    default: {
        MPI_Count big;
        MPI_Type_get_true_extent(any_type(), &a, &b);
        MPI_Type_size_x(any_type(), &big);
        calls++;
        break;
    }
    }
}

/* Receives whatever has arrived on `comm` (into a buffer of any size). */
static void drain(MPI_Comm comm) {
    int flag = 1;
    MPI_Status st;
    while (flag) {
        /* A communicator the run freed is an error: nothing to take. */
        if (MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, comm, &flag, &st) != MPI_SUCCESS)
            return;
        if (flag)
            MPI_Recv(buf2, REACH, MPI_BYTE, st.MPI_SOURCE, st.MPI_TAG, comm, MPI_STATUS_IGNORE);
    }
}

int main(int argc, char **argv) {
    OK(MPI_Init(&argc, &argv));
    OK(MPI_Comm_rank(MPI_COMM_WORLD, &check_rank));
    OK(MPI_Comm_size(MPI_COMM_WORLD, &size));
    OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    OK(MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN));
    peer = (check_rank + 1) % size;
    OK(MPI_Comm_dup(MPI_COMM_SELF, &pair_comm));
    const char *s = getenv("HMPI_FUZZ_SEED"), *c = getenv("HMPI_FUZZ_CALLS");
    uint64_t seed = s ? strtoull(s, NULL, 0) : 1;
    long target = c ? strtol(c, NULL, 0) : 5000;
    state = (seed * 0x9e3779b97f4a7c15ull) ^ ((uint64_t)(check_rank + 1) << 32) ^ 0x5bd1e995;
    if (state == 0)
        state = 1;
    memset(buf, 0x5a, sizeof buf);
    while (calls < target)
        one_call();
    /* Finish: withdraw the receives, take in what this rank sent itself,
     * complete everything, then take in the peers' messages. */
    for (int i = 0; i < nreqs; i++) {
        int rc = MPI_Cancel(&reqs[i]);
        if (rc != MPI_SUCCESS && getenv("HMPI_FUZZ_DEBUG")) {
            char text[MPI_MAX_ERROR_STRING];
            int len;
            MPI_Error_string(rc, text, &len);
            fprintf(stderr, "rank %d: cancel %d: %s\n", check_rank, req_kind[i], text);
        }
    }
    for (int round = 0; nreqs > 0; round++) {
        drain(MPI_COMM_SELF);
        for (int i = 0; i < ncomms; i++)
            drain(comms[i]);
        int kept = 0;
        for (int i = 0; i < nreqs; i++) {
            int flag = 0;
            MPI_Test(&reqs[i], &flag, MPI_STATUS_IGNORE);
            if (flag && reqs[i] != MPI_REQUEST_NULL)
                MPI_Request_free(&reqs[i]); /* an inactive persistent request */
            if (reqs[i] != MPI_REQUEST_NULL && !flag) {
                req_kind[kept] = req_kind[i];
                reqs[kept++] = reqs[i];
            }
        }
        nreqs = kept;
        if (round == 1000000) {
            for (int i = 0; i < nreqs; i++)
                fprintf(stderr, "rank %d: request %#llx (%d) still pending\n", check_rank,
                        (unsigned long long)(uintptr_t)reqs[i], req_kind[i]);
        }
        CHECK(round <= 1000000);
    }
    /* Windows: out of any epoch, then freed. */
    for (int i = 0; i < nwins; i++) {
        MPI_Win_unlock_all(wins[i]);
        MPI_Win_unlock(0, wins[i]);
        MPI_Win_fence(0, wins[i]);
        if (MPI_Win_free(&wins[i]) != MPI_SUCCESS) {
            MPI_Win_fence(MPI_MODE_NOSUCCEED, wins[i]);
            int rc = MPI_Win_free(&wins[i]);
            if (rc != MPI_SUCCESS) {
                char text[MPI_MAX_ERROR_STRING];
                int len;
                MPI_Error_string(rc, text, &len);
                fprintf(stderr, "rank %d: MPI_Win_free: %s\n", check_rank, text);
            }
            CHECK(rc == MPI_SUCCESS);
        }
    }
    for (int i = 0; i < ninfos; i++)
        OK(MPI_Info_free(&infos[i]));
    for (int i = 0; i < nkeys[0]; i++)
        OK(MPI_Comm_free_keyval(&keys[i]));
    for (int i = 0; i < nkeys[1]; i++)
        OK(MPI_Type_free_keyval(&keys[2 + i]));
    for (int i = 0; i < nkeys[2]; i++)
        OK(MPI_Win_free_keyval(&keys[4 + i]));
    if (bsend_attached) {
        void *addr;
        int sz;
        OK(MPI_Buffer_detach(&addr, &sz));
    }
    OK(MPI_Comm_free(&pair_comm));
    OK(MPI_Barrier(MPI_COMM_WORLD));
    drain(MPI_COMM_WORLD);
    OK(MPI_Barrier(MPI_COMM_WORLD));
    printf("fuzz: rank %d: %ld calls\n", check_rank, calls);
    if (getenv("HMPI_FUZZ_DEBUG"))
        printf("fuzz: rank %d made %ld windows, %ld topologies, %ld info objects, %ld keys; started %ld "
               "persistent requests\n",
               check_rank, made_wins, made_topos, made_infos, made_keys, started);
    OK(MPI_Finalize());
    PASSED("fuzz");
    return 0;
}
