/* DART from C (include/dart.h): put/get of many sizes between every pair
 * of units in a team allocation, handles, local allocations, atomics from
 * every unit at once, teams and groups (a team of the even units with its
 * own allocation), the collectives, and bad input returning DART error
 * codes. */
#include <dart.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int me = -1;

#define CHECK(cond)                                                          \
    do {                                                                     \
        if (!(cond)) {                                                       \
            fprintf(stderr, "unit %d: %s:%d: check failed: %s (%s)\n", me,   \
                    __FILE__, __LINE__, #cond, dart_last_error());           \
            fflush(stderr);                                                  \
            exit(3);                                                         \
        }                                                                    \
    } while (0)

#define DOK(call) CHECK((call) == DART_OK)
/* A call that must fail with `code` and say why. */
#define DFAILS(code, call)                                                   \
    do {                                                                     \
        CHECK((call) == (code));                                             \
        CHECK(strlen(dart_last_error()) > 0);                                \
    } while (0)

#define SLOT 20000
static const size_t sizes[] = {1, 2, 3, 7, 8, 15, 16, 63, 64, 100, 1000, 4095, 4096, 4097, 19999, 20000};
#define NSIZES (sizeof sizes / sizeof sizes[0])

static unsigned char pattern(int from, int to, size_t s, size_t k) {
    return (unsigned char)(from * 31 + to * 7 + s * 3 + k);
}

static void put_get_every_pair(int n) {
    dart_gptr_t g;
    DOK(dart_team_memalloc_aligned(DART_TEAM_ALL, (size_t)n * SLOT, DART_TYPE_BYTE, &g));
    CHECK(g.segid >= 1);
    dart_gptr_t mine = g;
    DOK(dart_gptr_setunit(&mine, DART_TEAM_UNIT_ID(me)));
    unsigned char *local = NULL;
    DOK(dart_gptr_getaddr(mine, (void **)&local));
    CHECK(local != NULL);
    unsigned char *buf = malloc(SLOT), *back = malloc(SLOT);
    for (size_t si = 0; si < NSIZES; si++) {
        size_t s = sizes[si];
        /* Into slot `me` of every unit (misaligned by si % 3). */
        for (int to = 0; to < n; to++) {
            size_t off = (size_t)me * SLOT + (s + si % 3 <= SLOT ? si % 3 : 0);
            for (size_t k = 0; k < s; k++) buf[k] = pattern(me, to, s, k);
            dart_gptr_t t = g;
            DOK(dart_gptr_setunit(&t, DART_TEAM_UNIT_ID(to)));
            DOK(dart_gptr_incaddr(&t, (int64_t)off));
            DOK(dart_put_blocking(t, buf, s, DART_TYPE_BYTE, DART_TYPE_BYTE));
        }
        DOK(dart_barrier(DART_TEAM_ALL));
        /* What every unit put here, through the local address. */
        for (int from = 0; from < n; from++) {
            size_t off = (size_t)from * SLOT + (s + si % 3 <= SLOT ? si % 3 : 0);
            for (size_t k = 0; k < s; k++) CHECK(local[off + k] == pattern(from, me, s, k));
        }
        /* And back with gets from every unit. */
        for (int from = 0; from < n; from++) {
            size_t off = (size_t)me * SLOT + (s + si % 3 <= SLOT ? si % 3 : 0);
            dart_gptr_t t = g;
            DOK(dart_gptr_setunit(&t, DART_TEAM_UNIT_ID(from)));
            DOK(dart_gptr_incaddr(&t, (int64_t)off));
            memset(back, 0, s);
            DOK(dart_get_blocking(back, t, s, DART_TYPE_BYTE, DART_TYPE_BYTE));
            for (size_t k = 0; k < s; k++) CHECK(back[k] == pattern(me, from, s, k));
        }
        DOK(dart_barrier(DART_TEAM_ALL));
    }

    /* Handles: eight puts of ints into the next unit, waited for all at
     * once, then gets with handles tested one by one. */
    int next = (me + 1) % n, prev = (me + n - 1) % n;
    int vals[8][16];
    dart_handle_t hs[8];
    for (int h = 0; h < 8; h++) {
        for (int k = 0; k < 16; k++) vals[h][k] = me * 1000 + h * 16 + k;
        dart_gptr_t t = g;
        DOK(dart_gptr_setunit(&t, DART_TEAM_UNIT_ID(next)));
        DOK(dart_gptr_incaddr(&t, (int64_t)(h * 16 * sizeof(int))));
        DOK(dart_put_handle(t, vals[h], 16, DART_TYPE_INT, DART_TYPE_INT, &hs[h]));
        CHECK(hs[h] != DART_HANDLE_NULL);
    }
    DOK(dart_waitall(hs, 8));
    for (int h = 0; h < 8; h++) CHECK(hs[h] == DART_HANDLE_NULL);
    DOK(dart_barrier(DART_TEAM_ALL));
    const int *got = (const int *)local;
    for (int k = 0; k < 128; k++) {
        CHECK(got[k] == prev * 1000 + k);
    }
    /* Everyone checked before anyone writes again. */
    DOK(dart_barrier(DART_TEAM_ALL));
    int in[8][16];
    for (int h = 0; h < 8; h++) {
        dart_gptr_t t = g;
        DOK(dart_gptr_setunit(&t, DART_TEAM_UNIT_ID(next)));
        DOK(dart_gptr_incaddr(&t, (int64_t)(h * 16 * sizeof(int))));
        DOK(dart_get_handle(in[h], t, 16, DART_TYPE_INT, DART_TYPE_INT, &hs[h]));
    }
    for (int h = 0; h < 8; h++) {
        int32_t done = 0;
        DOK(dart_test(&hs[h], &done));
        CHECK(done == 1 && hs[h] == DART_HANDLE_NULL);
        for (int k = 0; k < 16; k++) CHECK(in[h][k] == me * 1000 + h * 16 + k);
    }
    dart_handle_t none = DART_HANDLE_NULL;
    DOK(dart_wait(&none));
    DOK(dart_barrier(DART_TEAM_ALL));
    /* dart_put + dart_flush. */
    long word = 77 + me;
    dart_gptr_t t = g;
    DOK(dart_gptr_setunit(&t, DART_TEAM_UNIT_ID(next)));
    DOK(dart_put(t, &word, 1, DART_TYPE_LONG, DART_TYPE_LONG));
    DOK(dart_flush(t));
    DOK(dart_flush_all(t));
    DOK(dart_barrier(DART_TEAM_ALL));
    long w = 0;
    memcpy(&w, local, sizeof w);
    CHECK(w == 77 + prev);

    /* Bad input: past the unit's part, a unit outside the team, NULL. */
    dart_gptr_t past = mine;
    DOK(dart_gptr_incaddr(&past, (int64_t)n * SLOT - 4));
    DFAILS(DART_ERR_INVAL, dart_put_blocking(past, buf, 8, DART_TYPE_BYTE, DART_TYPE_BYTE));
    DFAILS(DART_ERR_INVAL, dart_get_blocking(buf, past, 2, DART_TYPE_INT, DART_TYPE_INT));
    DOK(dart_get_blocking(buf, past, 4, DART_TYPE_BYTE, DART_TYPE_BYTE));
    dart_gptr_t nobody = g;
    nobody.unitid = n + 5;
    DFAILS(DART_ERR_INVAL, dart_put_blocking(nobody, buf, 1, DART_TYPE_BYTE, DART_TYPE_BYTE));
    DFAILS(DART_ERR_INVAL, dart_gptr_setunit(&nobody, DART_TEAM_UNIT_ID(n)));
    DFAILS(DART_ERR_INVAL, dart_put_blocking(DART_GPTR_NULL, buf, 1, DART_TYPE_BYTE, DART_TYPE_BYTE));
    DFAILS(DART_ERR_INVAL, dart_put_blocking(mine, buf, 1, DART_TYPE_BYTE, DART_TYPE_INT));
    DFAILS(DART_ERR_INVAL, dart_put_blocking(mine, buf, 1, (dart_datatype_t)42, (dart_datatype_t)42));
    DFAILS(DART_ERR_INVAL, dart_put_blocking(mine, NULL, 1, DART_TYPE_BYTE, DART_TYPE_BYTE));
    DFAILS(DART_ERR_INVAL, dart_memfree(g));
    free(buf);
    free(back);
    DOK(dart_barrier(DART_TEAM_ALL));
    DOK(dart_team_memfree(g));
    /* The freed segment: every use is an error, never a crash. */
    DFAILS(DART_ERR_INVAL, dart_put_blocking(mine, &word, 1, DART_TYPE_LONG, DART_TYPE_LONG));
    DFAILS(DART_ERR_INVAL, dart_gptr_getaddr(mine, (void **)&local));
    DFAILS(DART_ERR_INVAL, dart_team_memfree(g));
    /* A new allocation gets a new segment id. */
    dart_gptr_t g2;
    DOK(dart_team_memalloc_aligned(DART_TEAM_ALL, 8, DART_TYPE_INT, &g2));
    CHECK(g2.segid > g.segid);
    DOK(dart_team_memfree(g2));
}

static void local_allocations(int n) {
    /* Unit 0 allocates n longs in its pool and sends the pointer; every
     * unit puts into its element; unit 0 checks and frees. */
    dart_gptr_t g = DART_GPTR_NULL;
    if (me == 0) DOK(dart_memalloc((size_t)n, DART_TYPE_LONG, &g));
    DOK(dart_bcast(&g, sizeof g, DART_TYPE_BYTE, DART_TEAM_UNIT_ID(0), DART_TEAM_ALL));
    CHECK(g.segid == DART_SEGMENT_LOCAL && g.unitid == 0 && !DART_GPTR_ISNULL(g));
    dart_gptr_t e = g;
    DOK(dart_gptr_incaddr(&e, (int64_t)(me * sizeof(long))));
    long v = 1000 + me;
    DOK(dart_put_blocking(e, &v, 1, DART_TYPE_LONG, DART_TYPE_LONG));
    DOK(dart_barrier(DART_TEAM_ALL));
    if (me == 0) {
        long *p = NULL;
        DOK(dart_gptr_getaddr(g, (void **)&p));
        for (int u = 0; u < n; u++) CHECK(p[u] == 1000 + u);
        /* setaddr maps a local address back. */
        dart_gptr_t back = g;
        DOK(dart_gptr_setaddr(&back, &p[n - 1]));
        dart_gptr_t want = g;
        DOK(dart_gptr_incaddr(&want, (int64_t)((n - 1) * sizeof(long))));
        CHECK(DART_GPTR_EQUAL(back, want));
    } else {
        DFAILS(DART_ERR_INVAL, dart_memfree(g)); /* only its unit frees it */
    }
    DOK(dart_barrier(DART_TEAM_ALL));
    if (me == 0) DOK(dart_memfree(g));
    /* Every unit's own allocations, gathered. */
    dart_gptr_t own;
    DOK(dart_memalloc(4, DART_TYPE_INT, &own));
    dart_gptr_t *all = malloc((size_t)n * sizeof *all);
    DOK(dart_allgather(&own, all, sizeof own, DART_TYPE_BYTE, DART_TEAM_ALL));
    int mark[4] = {me, me, me, me};
    dart_gptr_t dst = all[(me + 1) % n];
    DOK(dart_put_blocking(dst, mark, 4, DART_TYPE_INT, DART_TYPE_INT));
    DOK(dart_barrier(DART_TEAM_ALL));
    int *p = NULL;
    DOK(dart_gptr_getaddr(own, (void **)&p));
    for (int k = 0; k < 4; k++) CHECK(p[k] == (me + n - 1) % n);
    DOK(dart_barrier(DART_TEAM_ALL));
    DOK(dart_memfree(own));
    free(all);
}

static void atomics(int n) {
    dart_gptr_t g;
    DOK(dart_team_memalloc_aligned(DART_TEAM_ALL, 4, DART_TYPE_LONG, &g));
    /* Zeroed at every unit? Make sure. */
    dart_gptr_t mine = g;
    DOK(dart_gptr_setunit(&mine, DART_TEAM_UNIT_ID(me)));
    long zero[4] = {0, 0, 0, 0};
    DOK(dart_put_blocking(mine, zero, 4, DART_TYPE_LONG, DART_TYPE_LONG));
    DOK(dart_barrier(DART_TEAM_ALL));
    /* 200 fetch-and-adds from every unit on unit n-1's counter. */
    dart_gptr_t c = g;
    DOK(dart_gptr_setunit(&c, DART_TEAM_UNIT_ID(n - 1)));
    long one = 1, old = -1, prev = -1;
    for (int i = 0; i < 200; i++) {
        DOK(dart_fetch_and_op(c, &one, &old, DART_TYPE_LONG, DART_OP_SUM));
        CHECK(old > prev);
        prev = old;
    }
    /* One compare-and-swap wins. */
    dart_gptr_t lock = c;
    DOK(dart_gptr_incaddr(&lock, sizeof(long)));
    long want = me + 1, cmp = 0, was = -1;
    DOK(dart_compare_and_swap(lock, &want, &cmp, &was, DART_TYPE_LONG));
    int won = was == 0, winners = 0;
    DOK(dart_allreduce(&won, &winners, 1, DART_TYPE_INT, DART_OP_SUM, DART_TEAM_ALL));
    CHECK(winners == 1);
    /* XOR accumulates and a MAX. */
    dart_gptr_t x = c;
    DOK(dart_gptr_incaddr(&x, 2 * sizeof(long)));
    long bit = 1L << me;
    DOK(dart_accumulate(x, &bit, 1, DART_TYPE_LONG, DART_OP_BXOR));
    dart_gptr_t m = c;
    DOK(dart_gptr_incaddr(&m, 3 * sizeof(long)));
    long mine_v = 10 * (me + 1);
    DOK(dart_fetch_and_op(m, &mine_v, &old, DART_TYPE_LONG, DART_OP_MAX));
    DOK(dart_barrier(DART_TEAM_ALL));
    long total = 0;
    DOK(dart_fetch_and_op(c, NULL, &total, DART_TYPE_LONG, DART_OP_NO_OP));
    CHECK(total == 200L * n);
    long bits = 0, mx = 0;
    DOK(dart_get_blocking(&bits, x, 1, DART_TYPE_LONG, DART_TYPE_LONG));
    CHECK(bits == (1L << n) - 1);
    DOK(dart_get_blocking(&mx, m, 1, DART_TYPE_LONG, DART_TYPE_LONG));
    CHECK(mx == 10L * n);
    double d = 1.5, dold = 0;
    DFAILS(DART_ERR_INVAL, dart_compare_and_swap(c, &d, &d, &dold, DART_TYPE_DOUBLE));
    DFAILS(DART_ERR_INVAL, dart_fetch_and_op(c, &d, &dold, DART_TYPE_DOUBLE, DART_OP_BXOR));
    DFAILS(DART_ERR_INVAL, dart_fetch_and_op(c, &one, &old, DART_TYPE_LONG, (dart_operation_t)99));
    DOK(dart_barrier(DART_TEAM_ALL));
    DOK(dart_team_memfree(g));
}

static void teams_and_groups(int n) {
    dart_group_t even, odd, all, both, none;
    DOK(dart_group_create(&even));
    DOK(dart_group_create(&odd));
    for (int u = n - 1; u >= 0; u--) DOK(dart_group_addmember(u % 2 ? odd : even, DART_GLOBAL_UNIT_ID(u)));
    DFAILS(DART_ERR_INVAL, dart_group_addmember(even, DART_GLOBAL_UNIT_ID(n)));
    DOK(dart_group_union(even, odd, &all));
    DOK(dart_group_intersect(even, odd, &none));
    DOK(dart_group_clone(all, &both));
    size_t sz = 0;
    DOK(dart_group_size(all, &sz));
    CHECK(sz == (size_t)n);
    DOK(dart_group_size(none, &sz));
    CHECK(sz == 0);
    DOK(dart_group_size(even, &sz));
    CHECK(sz == (size_t)(n + 1) / 2);
    dart_global_unit_t *ids = malloc((size_t)n * sizeof *ids);
    DOK(dart_group_getmembers(even, ids));
    for (size_t i = 0; i < sz; i++) CHECK(ids[i].id == (int)(2 * i));
    int32_t is = -1;
    DOK(dart_group_ismember(odd, DART_GLOBAL_UNIT_ID(1), &is));
    CHECK(is == (n > 1));
    DOK(dart_group_delmember(both, DART_GLOBAL_UNIT_ID(0)));
    DFAILS(DART_ERR_INVAL, dart_group_delmember(both, DART_GLOBAL_UNIT_ID(0)));
    dart_group_t ag;
    DOK(dart_team_get_group(DART_TEAM_ALL, &ag));
    DOK(dart_group_size(ag, &sz));
    CHECK(sz == (size_t)n);

    /* The team of the even units, collective over all. */
    dart_team_t t = 99;
    DOK(dart_team_create(DART_TEAM_ALL, even, &t));
    if (me % 2) {
        CHECK(t == DART_TEAM_NULL);
    } else {
        CHECK(t > 0);
        size_t ts = 0;
        dart_team_unit_t tme;
        DOK(dart_team_size(t, &ts));
        CHECK(ts == (size_t)(n + 1) / 2);
        DOK(dart_team_myid(t, &tme));
        CHECK(tme.id == me / 2);
        dart_global_unit_t gid;
        dart_team_unit_t lid;
        DOK(dart_team_unit_l2g(t, DART_TEAM_UNIT_ID((int)ts - 1), &gid));
        CHECK(gid.id == 2 * ((int)ts - 1));
        DOK(dart_team_unit_g2l(t, DART_GLOBAL_UNIT_ID(me), &lid));
        CHECK(lid.id == me / 2);
        if (n > 1) DFAILS(DART_ERR_INVAL, dart_team_unit_g2l(t, DART_GLOBAL_UNIT_ID(1), &lid));
        DFAILS(DART_ERR_INVAL, dart_team_unit_l2g(t, DART_TEAM_UNIT_ID((int)ts), &gid));
        /* An allocation of the team: each puts its id into the next. */
        dart_gptr_t g;
        DOK(dart_team_memalloc_aligned(t, 1, DART_TYPE_INT, &g));
        CHECK(g.unitid == 0);
        dart_gptr_t to = g;
        DOK(dart_gptr_setunit(&to, DART_TEAM_UNIT_ID((tme.id + 1) % (int)ts)));
        int v = me;
        DOK(dart_put_blocking(to, &v, 1, DART_TYPE_INT, DART_TYPE_INT));
        DOK(dart_barrier(t));
        dart_gptr_t here = g;
        DOK(dart_gptr_setunit(&here, tme));
        int got = -1;
        DOK(dart_get_blocking(&got, here, 1, DART_TYPE_INT, DART_TYPE_INT));
        CHECK(got == 2 * ((tme.id + (int)ts - 1) % (int)ts));
        /* A unit outside the team. */
        if (n > 1) {
            dart_gptr_t out = g;
            out.unitid = 1;
            DFAILS(DART_ERR_INVAL, dart_get_blocking(&got, out, 1, DART_TYPE_INT, DART_TYPE_INT));
        }
        /* A team with segments cannot go. */
        dart_team_t keep = t;
        DFAILS(DART_ERR_INVAL, dart_team_destroy(&keep));
        DOK(dart_barrier(t));
        DOK(dart_team_memfree(g));
        /* A sub-team of the team (teams of teams), by clone. */
        dart_team_t c = DART_TEAM_NULL;
        DOK(dart_team_clone(t, &c));
        CHECK(c > t);
        DOK(dart_barrier(c));
        DOK(dart_team_destroy(&c));
        CHECK(c == DART_TEAM_NULL);
        dart_team_t old = t;
        DOK(dart_team_destroy(&t));
        CHECK(t == DART_TEAM_NULL);
        DFAILS(DART_ERR_INVAL, dart_barrier(old));
    }
    dart_team_t all_team = DART_TEAM_ALL;
    DFAILS(DART_ERR_INVAL, dart_team_destroy(&all_team));
    DFAILS(DART_ERR_INVAL, dart_team_size(1234, &sz));
    DFAILS(DART_ERR_INVAL, dart_barrier(DART_TEAM_NULL));
    DOK(dart_barrier(DART_TEAM_ALL));
    dart_group_t gs[] = {even, odd, all, both, none, ag};
    for (size_t i = 0; i < sizeof gs / sizeof gs[0]; i++) {
        DOK(dart_group_destroy(&gs[i]));
        CHECK(gs[i] == DART_GROUP_NULL);
    }
    free(ids);
}

static void collectives(int n) {
    int v[3] = {0, 0, 0};
    if (me == n - 1) v[0] = 5, v[1] = 6, v[2] = 7;
    DOK(dart_bcast(v, 3, DART_TYPE_INT, DART_TEAM_UNIT_ID(n - 1), DART_TEAM_ALL));
    CHECK(v[0] == 5 && v[1] == 6 && v[2] == 7);
    DFAILS(DART_ERR_INVAL, dart_bcast(v, 3, DART_TYPE_INT, DART_TEAM_UNIT_ID(n), DART_TEAM_ALL));
    double x[2] = {me + 0.5, -me}, s[2];
    DOK(dart_allreduce(x, s, 2, DART_TYPE_DOUBLE, DART_OP_SUM, DART_TEAM_ALL));
    CHECK(s[0] == n * (n - 1) / 2.0 + 0.5 * n && s[1] == -(n * (n - 1) / 2.0));
    long mx = me, r = -1;
    DOK(dart_allreduce(&mx, &r, 1, DART_TYPE_LONG, DART_OP_MAX, DART_TEAM_ALL));
    CHECK(r == n - 1);
    short *all = malloc((size_t)n * sizeof *all);
    short mine = (short)(me * 3);
    DOK(dart_allgather(&mine, all, 1, DART_TYPE_SHORT, DART_TEAM_ALL));
    for (int u = 0; u < n; u++) CHECK(all[u] == u * 3);
    int *snd = malloc((size_t)n * 2 * sizeof(int)), *rcv = malloc((size_t)n * 2 * sizeof(int));
    for (int u = 0; u < n; u++) snd[2 * u] = me * 100 + u, snd[2 * u + 1] = -1;
    DOK(dart_alltoall(snd, rcv, 2, DART_TYPE_INT, DART_TEAM_ALL));
    for (int u = 0; u < n; u++) CHECK(rcv[2 * u] == u * 100 + me && rcv[2 * u + 1] == -1);
    DFAILS(DART_ERR_INVAL, dart_allreduce(&mx, &r, 1, DART_TYPE_LONG, DART_OP_REPLACE, DART_TEAM_ALL));
    free(all);
    free(snd);
    free(rcv);
}

int main(int argc, char **argv) {
    dart_global_unit_t id;
    size_t size = 0;
    CHECK(!dart_initialized());
    DFAILS(DART_ERR_NOTINIT, dart_myid(&id));
    DOK(dart_init(&argc, &argv));
    CHECK(dart_initialized());
    DFAILS(DART_ERR_INVAL, dart_init(&argc, &argv));
    DOK(dart_myid(&id));
    DOK(dart_size(&size));
    me = id.id;
    int n = (int)size;
    CHECK(me >= 0 && me < n);
    dart_team_unit_t tid;
    size_t tsize = 0;
    DOK(dart_team_myid(DART_TEAM_ALL, &tid));
    DOK(dart_team_size(DART_TEAM_ALL, &tsize));
    CHECK(tid.id == me && tsize == size);
    DFAILS(DART_ERR_INVAL, dart_myid(NULL));

    put_get_every_pair(n);
    local_allocations(n);
    atomics(n);
    teams_and_groups(n);
    collectives(n);

    DOK(dart_exit());
    CHECK(!dart_initialized());
    DFAILS(DART_ERR_NOTINIT, dart_barrier(DART_TEAM_ALL));
    printf("rank %d: dart passed\n", me);
    fflush(stdout);
    return 0;
}
