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
    /* Full: cancel (a receive) and test the oldest until it finishes. */
    MPI_Cancel(&reqs[0]);
    int flag = 0;
    while (!flag)
        MPI_Test(&reqs[0], &flag, MPI_STATUS_IGNORE);
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

static void one_call(void) {
    MPI_Status st;
    MPI_Request r = MPI_REQUEST_NULL;
    int flag, x, n;
    MPI_Aint a, b;
    calls++;
    switch (last_kind = below(30)) {
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
    OK(MPI_Comm_free(&pair_comm));
    OK(MPI_Barrier(MPI_COMM_WORLD));
    drain(MPI_COMM_WORLD);
    OK(MPI_Barrier(MPI_COMM_WORLD));
    printf("fuzz: rank %d: %ld calls\n", check_rank, calls);
    OK(MPI_Finalize());
    PASSED("fuzz");
    return 0;
}
