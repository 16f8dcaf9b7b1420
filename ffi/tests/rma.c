/* One-sided communication from C: every window flavor, the attributes,
 * every operation (and its request-based form) under fence, lock,
 * lock_all and post/start/complete/wait, window memory from malloc (the
 * shared heap) and a static array (outside it), and the error classes of
 * bad calls. */
#include "check.h"
#include <string.h>

#define N 64

static long outside[N]; /* not in the shared heap */

static void check_attrs(MPI_Win win, void *base, MPI_Aint size, int flavor) {
    void *b = NULL;
    MPI_Aint *s = NULL;
    int *d = NULL, *f = NULL, *m = NULL, flag = 0;
    OK(MPI_Win_get_attr(win, MPI_WIN_BASE, &b, &flag));
    CHECK(flag && b == base);
    OK(MPI_Win_get_attr(win, MPI_WIN_SIZE, &s, &flag));
    CHECK(flag && *s == size);
    OK(MPI_Win_get_attr(win, MPI_WIN_DISP_UNIT, &d, &flag));
    CHECK(flag && *d == (int)sizeof(long));
    OK(MPI_Win_get_attr(win, MPI_WIN_CREATE_FLAVOR, &f, &flag));
    CHECK(flag && *f == flavor);
    OK(MPI_Win_get_attr(win, MPI_WIN_MODEL, &m, &flag));
    CHECK(flag && *m == MPI_WIN_UNIFIED);
}

/* Post/start/complete/wait on a window over `mem`: each rank puts into
 * its successor, then (second epoch) only rank 0 sends, so the others
 * receive nothing and still see their epoch end. */
static void pscw(long *mem, int rank, int size) {
    int next = (rank + 1) % size, prev = (rank + size - 1) % size;
    MPI_Win win;
    memset(mem, 0, N * sizeof(long));
    OK(MPI_Win_create(mem, N * sizeof(long), sizeof(long), MPI_INFO_NULL, MPI_COMM_WORLD, &win));
    check_attrs(win, mem, N * sizeof(long), MPI_WIN_FLAVOR_CREATE);
    MPI_Group all;
    OK(MPI_Win_get_group(win, &all));
    int gs = 0;
    OK(MPI_Group_size(all, &gs));
    CHECK(gs == size);
    OK(MPI_Win_post(all, 0, win));
    OK(MPI_Win_start(all, 0, win));
    long v[2] = {10 * rank + 1, 10 * rank + 2};
    OK(MPI_Put(v, 2, MPI_LONG, next, 2 * rank, 2, MPI_LONG, win));
    long g = -1;
    OK(MPI_Get(&g, 1, MPI_LONG, next, N - 1, 1, MPI_LONG, win));
    CHECK(g == 0);
    OK(MPI_Win_complete(win));
    OK(MPI_Win_wait(win));
    CHECK(mem[2 * prev] == 10 * prev + 1 && mem[2 * prev + 1] == 10 * prev + 2);
    OK(MPI_Barrier(MPI_COMM_WORLD));

    OK(MPI_Win_post(all, MPI_MODE_NOPUT, win));
    OK(MPI_Win_start(all, 0, win));
    if (rank == 0) {
        long one = 1;
        for (int t = 0; t < size; t++)
            OK(MPI_Accumulate(&one, 1, MPI_LONG, t, N - 2, 1, MPI_LONG, MPI_SUM, win));
    }
    OK(MPI_Win_complete(win));
    int flag = 0;
    while (!flag)
        OK(MPI_Win_test(win, &flag));
    CHECK(mem[N - 2] == 1);
    OK(MPI_Group_free(&all));
    OK(MPI_Win_free(&win));
    CHECK(win == MPI_WIN_NULL);
}

static int handled_code = 0;
static MPI_Win handled_win = MPI_WIN_NULL;

static void on_win_error(MPI_Win *win, int *code, ...) {
    handled_win = *win;
    handled_code = *code;
}

static void on_comm_error(MPI_Comm *comm, int *code, ...) {
    (void)comm;
    (void)code;
}

int main(int argc, char **argv) {
    OK(MPI_Init(&argc, &argv));
    int rank, size;
    OK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    OK(MPI_Comm_size(MPI_COMM_WORLD, &size));
    check_rank = rank;
    int next = (rank + 1) % size, prev = (rank + size - 1) % size;
    int n = size + 2;

    /* Allocated: attributes, name, fence epoch. */
    long *base = NULL;
    MPI_Win win;
    OK(MPI_Win_allocate(n * sizeof(long), sizeof(long), MPI_INFO_NULL, MPI_COMM_WORLD, &base, &win));
    check_attrs(win, base, n * sizeof(long), MPI_WIN_FLAVOR_ALLOCATE);
    char name[MPI_MAX_OBJECT_NAME];
    int len = -1;
    OK(MPI_Win_get_name(win, name, &len));
    CHECK(len == 0);
    OK(MPI_Win_set_name(win, "rma window"));
    OK(MPI_Win_get_name(win, name, &len));
    CHECK(len == 10 && strcmp(name, "rma window") == 0);
    MPI_Errhandler eh;
    OK(MPI_Win_get_errhandler(win, &eh));
    CHECK(eh == MPI_ERRORS_ARE_FATAL);
    for (int i = 0; i < n; i++)
        base[i] = rank * 100 + i;

    OK(MPI_Win_fence(MPI_MODE_NOPRECEDE, win));
    long v = 1000 + rank, g = -1, one = rank + 1;
    OK(MPI_Put(&v, 1, MPI_LONG, next, rank, 1, MPI_LONG, win));
    OK(MPI_Get(&g, 1, MPI_LONG, prev, size + 1, 1, MPI_LONG, win));
    CHECK(g == prev * 100 + size + 1);
    OK(MPI_Accumulate(&one, 1, MPI_LONG, 0, size, 1, MPI_LONG, MPI_SUM, win));
    OK(MPI_Win_fence(MPI_MODE_NOSUCCEED, win));
    CHECK(base[prev] == 1000 + prev);
    if (rank == 0)
        CHECK(base[size] == size + (long)size * (size + 1) / 2);

    /* Lock: fetch-and-op and get-accumulate into rank 0, exclusively. */
    OK(MPI_Barrier(MPI_COMM_WORLD));
    OK(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 0, 0, win));
    long old = -1;
    OK(MPI_Fetch_and_op(&one, &old, MPI_LONG, 0, size + 1, MPI_SUM, win));
    CHECK(old >= size + 1);
    long mx = 5000 + rank, was = -1;
    OK(MPI_Get_accumulate(&mx, 1, MPI_LONG, &was, 1, MPI_LONG, 0, 0, 1, MPI_LONG, MPI_MAX, win));
    OK(MPI_Win_unlock(0, win));
    OK(MPI_Barrier(MPI_COMM_WORLD));
    if (rank == 0) {
        CHECK(base[size + 1] == size + 1 + (long)size * (size + 1) / 2);
        CHECK(base[0] == 5000 + size - 1);
    }

    /* lock_all: the request-based forms, complete at once. */
    OK(MPI_Barrier(MPI_COMM_WORLD));
    OK(MPI_Win_lock_all(0, win));
    MPI_Request r[3];
    long x = 7 + rank, y = -1;
    OK(MPI_Rput(&x, 1, MPI_LONG, next, rank, 1, MPI_LONG, win, &r[0]));
    OK(MPI_Rget(&y, 1, MPI_LONG, next, rank, 1, MPI_LONG, win, &r[1]));
    OK(MPI_Raccumulate(&one, 1, MPI_LONG, next, rank, 1, MPI_LONG, MPI_SUM, win, &r[2]));
    OK(MPI_Waitall(3, r, MPI_STATUSES_IGNORE));
    CHECK(r[0] == MPI_REQUEST_NULL && r[1] == MPI_REQUEST_NULL && r[2] == MPI_REQUEST_NULL);
    CHECK(y == 7 + rank);
    long res = -1;
    MPI_Request q;
    OK(MPI_Rget_accumulate(NULL, 0, MPI_DATATYPE_NULL, &res, 1, MPI_LONG, next, rank, 1, MPI_LONG,
                           MPI_NO_OP, win, &q));
    int done = 0;
    OK(MPI_Test(&q, &done, MPI_STATUS_IGNORE));
    CHECK(done && q == MPI_REQUEST_NULL);
    CHECK(res == 7 + rank + rank + 1);
    long cmp = res, nv = -1, out = 0;
    OK(MPI_Compare_and_swap(&nv, &cmp, &out, MPI_LONG, next, rank, win));
    CHECK(out == res);
    OK(MPI_Compare_and_swap(&nv, &cmp, &out, MPI_LONG, next, rank, win));
    CHECK(out == -1); /* no match: unchanged */
    OK(MPI_Win_flush(next, win));
    OK(MPI_Win_flush_local(next, win));
    OK(MPI_Win_flush_all(win));
    OK(MPI_Win_flush_local_all(win));
    OK(MPI_Win_sync(win));
    OK(MPI_Win_unlock_all(win));
    OK(MPI_Barrier(MPI_COMM_WORLD));
    CHECK(base[prev] == -1);

    /* Bad calls, under MPI_ERRORS_RETURN. */
    OK(MPI_Win_set_errhandler(win, MPI_ERRORS_RETURN));
    OK(MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN));
    FAILS(MPI_ERR_RMA_SYNC, MPI_Put(&v, 1, MPI_LONG, next, 0, 1, MPI_LONG, win));
    FAILS(MPI_ERR_RMA_SYNC, MPI_Win_unlock(next, win));
    FAILS(MPI_ERR_RMA_SYNC, MPI_Win_complete(win));
    OK(MPI_Win_lock(MPI_LOCK_SHARED, rank, 0, win));
    FAILS(MPI_ERR_RMA_RANGE, MPI_Put(&v, 1, MPI_LONG, rank, n, 1, MPI_LONG, win));
    FAILS(MPI_ERR_RMA_RANGE, MPI_Put(&v, 1, MPI_LONG, rank, -1, 1, MPI_LONG, win));
    FAILS(MPI_ERR_RANK, MPI_Put(&v, 1, MPI_LONG, size, 0, 1, MPI_LONG, win));
    FAILS(MPI_ERR_RMA_SYNC, MPI_Win_lock(MPI_LOCK_SHARED, rank, 0, win));
    FAILS(MPI_ERR_LOCKTYPE, MPI_Win_lock(7, next, 0, win));
    FAILS(MPI_ERR_RMA_SYNC, MPI_Win_free(&win));
    CHECK(win != MPI_WIN_NULL);
    MPI_Aint qs;
    int qd;
    void *qb;
    FAILS(MPI_ERR_RMA_FLAVOR, MPI_Win_shared_query(win, 0, &qs, &qd, &qb));
    FAILS(MPI_ERR_OP, MPI_Accumulate(&v, 1, MPI_DOUBLE, rank, 0, 1, MPI_DOUBLE, MPI_BAND, win));
    FAILS(MPI_ERR_BUFFER, MPI_Put(NULL, 1, MPI_LONG, rank, 0, 1, MPI_LONG, win));
    FAILS(MPI_ERR_BUFFER, MPI_Get(NULL, 1, MPI_LONG, rank, 0, 1, MPI_LONG, win));
    FAILS(MPI_ERR_BUFFER, MPI_Fetch_and_op(&v, NULL, MPI_LONG, rank, 0, MPI_SUM, win));
    FAILS(MPI_ERR_BUFFER, MPI_Compare_and_swap(&v, NULL, &v, MPI_LONG, rank, 0, win));
    int kv = 0;
    FAILS(MPI_ERR_KEYVAL, MPI_Win_get_attr(win, 12345, &qb, &kv));
    OK(MPI_Win_unlock(rank, win));
    FAILS(MPI_ERR_WIN, MPI_Win_fence(0, MPI_WIN_NULL));
    OK(MPI_Win_free(&win));
    CHECK(win == MPI_WIN_NULL);

    /* Hints: no_locks from the creating call, what is in effect, set_info. */
    MPI_Info hints, used;
    OK(MPI_Info_create(&hints));
    OK(MPI_Info_set(hints, "no_locks", "true"));
    OK(MPI_Info_set(hints, "accumulate_ordering", "none"));
    long *hb = NULL;
    MPI_Win hw;
    OK(MPI_Win_allocate(sizeof(long), sizeof(long), hints, MPI_COMM_WORLD, &hb, &hw));
    OK(MPI_Win_get_info(hw, &used));
    char hv[MPI_MAX_INFO_VAL];
    int hl = sizeof hv, hf = 0;
    OK(MPI_Info_get_string(used, "no_locks", &hl, hv, &hf));
    CHECK(hf && strcmp(hv, "true") == 0);
    hl = sizeof hv;
    OK(MPI_Info_get_string(used, "accumulate_ordering", &hl, hv, &hf));
    CHECK(hf && strcmp(hv, "rar,raw,war,waw") == 0);
    hl = sizeof hv;
    OK(MPI_Info_get_string(used, "same_disp_unit", &hl, hv, &hf));
    CHECK(hf && strcmp(hv, "true") == 0);
    OK(MPI_Info_free(&used));
    OK(MPI_Win_set_errhandler(hw, MPI_ERRORS_RETURN));
    FAILS(MPI_ERR_RMA_SYNC, MPI_Win_lock(MPI_LOCK_SHARED, rank, 0, hw));
    FAILS(MPI_ERR_RMA_SYNC, MPI_Win_lock_all(0, hw));
    OK(MPI_Info_set(hints, "no_locks", "false"));
    OK(MPI_Win_set_info(hw, hints));
    OK(MPI_Win_lock(MPI_LOCK_SHARED, rank, 0, hw));
    OK(MPI_Win_unlock(rank, hw));
    OK(MPI_Win_set_info(hw, MPI_INFO_NULL));
    FAILS(MPI_ERR_INFO, MPI_Win_set_info(hw, (MPI_Info)MPI_COMM_WORLD));
    FAILS(MPI_ERR_ARG, MPI_Win_get_info(hw, NULL));

    /* A user error handler for windows: called with the window and the
       code, which the call returns; not for communicators, and a
       communicator's handler is not for windows. */
    MPI_Errhandler weh, ceh, got;
    OK(MPI_Win_create_errhandler(on_win_error, &weh));
    OK(MPI_Comm_create_errhandler(on_comm_error, &ceh));
    OK(MPI_Win_set_errhandler(hw, weh));
    OK(MPI_Win_get_errhandler(hw, &got));
    CHECK(got == weh);
    CHECK(MPI_Put(&v, 1, MPI_LONG, rank, 0, 1, MPI_LONG, hw) == MPI_ERR_RMA_SYNC);
    CHECK(handled_code == MPI_ERR_RMA_SYNC && handled_win == hw);
    handled_code = 0;
    OK(MPI_Win_call_errhandler(hw, MPI_ERR_OTHER));
    CHECK(handled_code == MPI_ERR_OTHER && handled_win == hw);
    OK(MPI_Errhandler_free(&weh));
    CHECK(weh == MPI_ERRHANDLER_NULL);
    handled_code = 0;
    CHECK(MPI_Win_unlock(rank, hw) == MPI_ERR_RMA_SYNC);
    CHECK(handled_code == MPI_ERR_RMA_SYNC); /* still attached after the free */
    OK(MPI_Win_set_errhandler(hw, MPI_ERRORS_RETURN));
    FAILS(MPI_ERR_ARG, MPI_Win_set_errhandler(hw, ceh));
    OK(MPI_Win_create_errhandler(on_win_error, &weh));
    FAILS(MPI_ERR_ARG, MPI_Comm_set_errhandler(MPI_COMM_SELF, weh));
    FAILS(MPI_ERR_ARG, MPI_Win_create_errhandler(NULL, &got));
    OK(MPI_Errhandler_free(&weh));
    OK(MPI_Errhandler_free(&ceh));
    OK(MPI_Win_free(&hw));
    OK(MPI_Info_free(&hints));

    /* Memory from malloc (the shared heap) and a static array. */
    long *heap = malloc(N * sizeof(long));
    CHECK(heap != NULL);
    pscw(heap, rank, size);
    pscw(outside, rank, size);
    free(heap);

    /* Shared: member r has r + 1 longs, contiguous, stored to directly. */
    long *sb = NULL;
    MPI_Win sw;
    OK(MPI_Win_allocate_shared((rank + 1) * sizeof(long), sizeof(long), MPI_INFO_NULL,
                               MPI_COMM_WORLD, &sb, &sw));
    long *p0 = NULL, *pn = NULL;
    MPI_Aint s0, sn;
    int d0, dn;
    OK(MPI_Win_shared_query(sw, 0, &s0, &d0, &p0));
    OK(MPI_Win_shared_query(sw, next, &sn, &dn, &pn));
    CHECK(s0 == (MPI_Aint)sizeof(long) && d0 == (int)sizeof(long));
    CHECK(pn == p0 + (long)next * (next + 1) / 2 && sn == (MPI_Aint)((next + 1) * sizeof(long)));
    CHECK(sb == p0 + (long)rank * (rank + 1) / 2);
    OK(MPI_Win_fence(0, sw));
    for (int i = 0; i <= next; i++)
        pn[i] = 100 * rank + i;
    OK(MPI_Win_fence(0, sw));
    for (int i = 0; i <= rank; i++)
        CHECK(sb[i] == 100 * prev + i);
    OK(MPI_Win_free(&sw));

    /* Dynamic: attach, address by absolute address. */
    MPI_Win dw;
    OK(MPI_Win_create_dynamic(MPI_INFO_NULL, MPI_COMM_WORLD, &dw));
    long *att = calloc(size, sizeof(long));
    OK(MPI_Win_attach(dw, att, size * sizeof(long)));
    long mine = (long)(MPI_Aint)att, *addrs = malloc(size * sizeof(long));
    OK(MPI_Allgather(&mine, 1, MPI_LONG, addrs, 1, MPI_LONG, MPI_COMM_WORLD));
    OK(MPI_Win_lock_all(0, dw));
    long val = 70 + rank;
    OK(MPI_Put(&val, 1, MPI_LONG, next, (MPI_Aint)addrs[next] + rank * (MPI_Aint)sizeof(long), 1,
               MPI_LONG, dw));
    OK(MPI_Win_unlock_all(dw));
    OK(MPI_Barrier(MPI_COMM_WORLD));
    CHECK(att[prev] == 70 + prev);
    OK(MPI_Win_detach(dw, att));
    OK(MPI_Win_free(&dw));
    free(att);
    free(addrs);

    /* The large-count forms. */
    long *cb = NULL;
    MPI_Win cw;
    OK(MPI_Win_allocate_c(4 * sizeof(long), sizeof(long), MPI_INFO_NULL, MPI_COMM_WORLD, &cb, &cw));
    OK(MPI_Win_lock_all(0, cw));
    long four[4] = {1, 2, 3, 4}, back4[4] = {0}, r4[4] = {0};
    OK(MPI_Put_c(four, 4, MPI_LONG, next, 0, 4, MPI_LONG, cw));
    OK(MPI_Accumulate_c(four, 4, MPI_LONG, next, 0, 4, MPI_LONG, MPI_SUM, cw));
    OK(MPI_Get_c(back4, 4, MPI_LONG, next, 0, 4, MPI_LONG, cw));
    CHECK(back4[0] == 2 && back4[3] == 8);
    MPI_Request cr;
    OK(MPI_Rget_accumulate_c(NULL, 0, MPI_DATATYPE_NULL, r4, 4, MPI_LONG, next, 0, 4, MPI_LONG,
                             MPI_NO_OP, cw, &cr));
    OK(MPI_Wait(&cr, MPI_STATUS_IGNORE));
    CHECK(r4[1] == 4 && cr == MPI_REQUEST_NULL);
    OK(MPI_Win_unlock_all(cw));
    OK(MPI_Win_free(&cw));

    PASSED("rma");
    return MPI_Finalize();
}
