/* An OpenSHMEM program written to the 1.5 specification: typed, sized and
 * untyped put/get/p/g, nbi + quiet, fence + flag + wait_until, atomics from
 * every PE, barrier_all / sync_all, test, reductions, broadcast, alltoall,
 * fcollect, teams from split_strided, shmem_ptr, calloc / align, and the
 * C11 type-generic names. It uses only shmem.h, so it builds with any
 * OpenSHMEM 1.5 implementation. With SHMEM_TEST_BAD_ADDRESS set, the last
 * PE puts to a non-symmetric object instead. */
#include <shmem.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int me = -1;

#define CHECK(cond)                                                          \
    do {                                                                     \
        if (!(cond)) {                                                       \
            fprintf(stderr, "PE %d: %s:%d: check failed: %s\n", me,          \
                    __FILE__, __LINE__, #cond);                              \
            fflush(stderr);                                                  \
            exit(3);                                                         \
        }                                                                    \
    } while (0)

#define N 256

static void put_get(int npes) {
    long *dst = shmem_malloc((size_t)N * npes * sizeof(long));
    long *src = malloc(N * sizeof(long));
    CHECK(dst != NULL && src != NULL);
    for (int k = 0; k < N; k++) src[k] = me * 100000L + k;
    /* Slot `me` of every PE, in pieces of growing size. */
    for (int pe = 0; pe < npes; pe++) {
        size_t done = 0, piece = 1;
        while (done < N) {
            size_t n = piece < N - done ? piece : N - done;
            shmem_long_put(dst + (size_t)me * N + done, src + done, n, pe);
            done += n;
            piece = piece * 2 + 1;
        }
    }
    shmem_barrier_all();
    for (int pe = 0; pe < npes; pe++)
        for (int k = 0; k < N; k++) CHECK(dst[(size_t)pe * N + k] == pe * 100000L + k);
    /* And back: slot `me` of every PE holds what this PE put. */
    long *back = malloc(N * sizeof(long));
    for (int pe = 0; pe < npes; pe++) {
        memset(back, 0, N * sizeof(long));
        shmem_long_get(back, dst + (size_t)me * N, N, pe);
        for (int k = 0; k < N; k++) CHECK(back[k] == src[k]);
        CHECK(shmem_long_g(dst + (size_t)me * N + 7, pe) == src[7]);
    }
    shmem_barrier_all();
    /* p and g of single elements, in the other PEs' slot `me`. */
    for (int pe = 0; pe < npes; pe++) shmem_long_p(dst + (size_t)me * N, -me - 1, pe);
    shmem_barrier_all();
    for (int pe = 0; pe < npes; pe++) CHECK(dst[(size_t)pe * N] == -pe - 1);
    shmem_barrier_all();

    /* Sized and untyped forms, bytes of odd lengths. */
    unsigned char *bytes = shmem_malloc(4096);
    unsigned char pattern[4096];
    int next = (me + 1) % npes, prev = (me + npes - 1) % npes;
    for (int k = 0; k < 4096; k++) pattern[k] = (unsigned char)(k * 7 + me);
    shmem_putmem(bytes, pattern, 1, next);
    shmem_putmem(bytes + 1, pattern + 1, 2, next);
    shmem_put8(bytes + 3, pattern + 3, 5, next);
    shmem_put16(bytes + 8, pattern + 8, 4, next);
    shmem_put32(bytes + 16, pattern + 16, 4, next);
    shmem_put64(bytes + 32, pattern + 32, 4, next);
    shmem_put128(bytes + 64, pattern + 64, 4, next);
    shmem_putmem_nbi(bytes + 128, pattern + 128, 4096 - 128 - 1, next);
    shmem_quiet();
    shmem_barrier_all();
    for (int k = 0; k < 4095; k++) CHECK(bytes[k] == (unsigned char)(k * 7 + prev));
    unsigned char in[4096];
    shmem_getmem_nbi(in, bytes, 4095, next);
    shmem_get64(in + 4000, bytes + 8, 2, next);
    shmem_quiet();
    for (int k = 0; k < 4000; k++) CHECK(in[k] == (unsigned char)(k * 7 + me));
    for (int k = 0; k < 16; k++) CHECK(in[4000 + k] == (unsigned char)((k + 8) * 7 + me));
    shmem_barrier_all();

    /* Data, fence, flag: the flag's wait orders the data before it. */
    int *flag = shmem_calloc(1, sizeof(int));
    CHECK(*flag == 0);
    shmem_barrier_all();
    for (int k = 0; k < N; k++) src[k] = me * 7L + k;
    shmem_long_put_nbi(dst, src, N, next);
    shmem_fence();
    shmem_int_atomic_set(flag, 1, next);
    shmem_int_wait_until(flag, SHMEM_CMP_EQ, 1);
    for (int k = 0; k < N; k++) CHECK(dst[k] == prev * 7L + k);
    CHECK(shmem_int_test(flag, SHMEM_CMP_GE, 1) == 1);
    CHECK(shmem_int_test(flag, SHMEM_CMP_GT, 1) == 0);
    shmem_barrier_all();

    /* shmem_ptr: every PE's object is addressable here (one node). */
    int accessible = shmem_addr_accessible(dst, next);
    CHECK(accessible == 1);
    int local = 0;
    CHECK(shmem_addr_accessible(&local, next) == 0);
    long *nd = shmem_ptr(dst, next);
    if (nd != NULL) CHECK(nd[0] == me * 7L);
    CHECK(shmem_ptr(dst, me) == dst);
    shmem_barrier_all();

    shmem_free(flag);
    shmem_free(bytes);
    shmem_free(dst);
    free(src);
    free(back);
}

static void atomics(int npes) {
    long *counter = shmem_calloc(4, sizeof(long));
    uint64_t *bits = shmem_calloc(1, sizeof(uint64_t));
    double *d = shmem_calloc(1, sizeof(double));
    shmem_barrier_all();
    int target = npes - 1;
    long last = -1;
    for (int i = 0; i < 100; i++) {
        long old = shmem_long_atomic_fetch_add(&counter[0], 2, target);
        CHECK(old > last && old % 2 == 0);
        last = old;
        shmem_long_atomic_inc(&counter[1], target);
        shmem_long_atomic_add(&counter[2], me, target);
    }
    long ticket = shmem_long_atomic_fetch_inc(&counter[3], 0);
    CHECK(ticket >= 0 && ticket < npes);
    /* One compare-and-swap from 0 wins. */
    int *lock = shmem_calloc(1, sizeof(int));
    shmem_barrier_all();
    int was = shmem_int_atomic_compare_swap(lock, 0, me + 1, 0);
    uint64_t old_bits = shmem_uint64_atomic_fetch_xor(bits, (uint64_t)1 << me, target);
    CHECK((old_bits & ((uint64_t)1 << me)) == 0);
    shmem_barrier_all();
    CHECK(shmem_long_atomic_fetch(&counter[0], target) == 200L * npes);
    CHECK(shmem_long_atomic_fetch(&counter[1], target) == 100L * npes);
    CHECK(shmem_long_atomic_fetch(&counter[2], target) == 100L * npes * (npes - 1) / 2);
    CHECK(shmem_long_atomic_fetch(&counter[3], 0) == npes);
    CHECK(shmem_uint64_atomic_fetch(bits, target) == ((uint64_t)1 << npes) - 1);
    int winner = shmem_int_atomic_fetch(lock, 0);
    CHECK(winner >= 1 && winner <= npes);
    CHECK((was == 0) == (winner == me + 1));
    /* Swap passes a token: every PE swaps once, the values form a chain. */
    shmem_barrier_all();
    if (me == 0) shmem_double_atomic_set(d, -1.0, 0);
    shmem_barrier_all();
    double got = shmem_double_atomic_swap(d, (double)me, 0);
    CHECK(got == -1.0 || (got >= 0 && got < npes && got != me));
    shmem_barrier_all();
    shmem_uint64_atomic_and(bits, 0, target);
    shmem_uint64_atomic_or(bits, 5, target);
    shmem_barrier_all();
    CHECK(shmem_uint64_atomic_fetch(bits, target) == 5);
    shmem_barrier_all();
    shmem_free(lock);
    shmem_free(d);
    shmem_free(bits);
    shmem_free(counter);
}

static void collectives(int npes) {
    int *isrc = shmem_malloc(4 * sizeof(int)), *idst = shmem_malloc(4 * sizeof(int));
    double *dsrc = shmem_malloc(2 * sizeof(double)), *ddst = shmem_malloc(2 * sizeof(double));
    for (int k = 0; k < 4; k++) isrc[k] = me + k;
    dsrc[0] = me + 0.5;
    dsrc[1] = 1.0;
    shmem_barrier_all();
    CHECK(shmem_int_sum_reduce(SHMEM_TEAM_WORLD, idst, isrc, 4) == 0);
    for (int k = 0; k < 4; k++) CHECK(idst[k] == npes * (npes - 1) / 2 + k * npes);
    CHECK(shmem_int_max_reduce(SHMEM_TEAM_WORLD, idst, isrc, 4) == 0);
    for (int k = 0; k < 4; k++) CHECK(idst[k] == npes - 1 + k);
    CHECK(shmem_int_min_reduce(SHMEM_TEAM_WORLD, idst, isrc, 4) == 0);
    for (int k = 0; k < 4; k++) CHECK(idst[k] == k);
    CHECK(shmem_double_sum_reduce(SHMEM_TEAM_WORLD, ddst, dsrc, 2) == 0);
    CHECK(ddst[0] == npes * (npes - 1) / 2.0 + 0.5 * npes && ddst[1] == npes);
    CHECK(shmem_double_prod_reduce(SHMEM_TEAM_WORLD, ddst, dsrc, 2) == 0);
    CHECK(ddst[1] == 1.0);
    unsigned int *usrc = shmem_malloc(sizeof(unsigned int)), *udst = shmem_malloc(sizeof(unsigned int));
    *usrc = 1u << me;
    shmem_barrier_all();
    CHECK(shmem_uint_or_reduce(SHMEM_TEAM_WORLD, udst, usrc, 1) == 0);
    CHECK(*udst == (1u << npes) - 1);
    CHECK(shmem_uint_xor_reduce(SHMEM_TEAM_WORLD, udst, usrc, 1) == 0);
    CHECK(*udst == (1u << npes) - 1);
    CHECK(shmem_uint_and_reduce(SHMEM_TEAM_WORLD, udst, usrc, 1) == 0);
    CHECK(*udst == (npes == 1 ? 1u : 0u));
    /* In place. */
    CHECK(shmem_int_sum_reduce(SHMEM_TEAM_WORLD, isrc, isrc, 4) == 0);
    CHECK(isrc[3] == npes * (npes - 1) / 2 + 3 * npes);

    /* Broadcast from the last PE. */
    long *bsrc = shmem_malloc(3 * sizeof(long)), *bdst = shmem_malloc(3 * sizeof(long));
    for (int k = 0; k < 3; k++) bsrc[k] = me * 10 + k, bdst[k] = -1;
    shmem_barrier_all();
    CHECK(shmem_long_broadcast(SHMEM_TEAM_WORLD, bdst, bsrc, 3, npes - 1) == 0);
    for (int k = 0; k < 3; k++) CHECK(bdst[k] == (npes - 1) * 10 + k);

    /* Alltoall of two ints per PE pair, and fcollect. */
    int *asrc = shmem_malloc((size_t)npes * 2 * sizeof(int));
    int *adst = shmem_malloc((size_t)npes * 2 * sizeof(int));
    for (int pe = 0; pe < npes; pe++) asrc[2 * pe] = me * 100 + pe, asrc[2 * pe + 1] = -me;
    shmem_barrier_all();
    CHECK(shmem_int_alltoall(SHMEM_TEAM_WORLD, adst, asrc, 2) == 0);
    for (int pe = 0; pe < npes; pe++) CHECK(adst[2 * pe] == pe * 100 + me && adst[2 * pe + 1] == -pe);
    CHECK(shmem_int_fcollect(SHMEM_TEAM_WORLD, adst, asrc, 2) == 0);
    for (int pe = 0; pe < npes; pe++) CHECK(adst[2 * pe] == pe * 100 && adst[2 * pe + 1] == -pe);
    shmem_sync_all();
    shmem_free(adst);
    shmem_free(asrc);
    shmem_free(bdst);
    shmem_free(bsrc);
    shmem_free(udst);
    shmem_free(usrc);
    shmem_free(ddst);
    shmem_free(dsrc);
    shmem_free(idst);
    shmem_free(isrc);
}

static void teams(int npes) {
    CHECK(shmem_team_my_pe(SHMEM_TEAM_WORLD) == me);
    CHECK(shmem_team_n_pes(SHMEM_TEAM_WORLD) == npes);
    shmem_team_t even = SHMEM_TEAM_INVALID;
    int neven = (npes + 1) / 2;
    CHECK(shmem_team_split_strided(SHMEM_TEAM_WORLD, 0, 2, neven, NULL, 0, &even) == 0);
    long *src = shmem_malloc(sizeof(long)), *dst = shmem_malloc(sizeof(long));
    *src = me;
    if (me % 2 == 0) {
        CHECK(even != SHMEM_TEAM_INVALID);
        CHECK(shmem_team_my_pe(even) == me / 2);
        CHECK(shmem_team_n_pes(even) == neven);
        CHECK(shmem_team_translate_pe(even, neven - 1, SHMEM_TEAM_WORLD) == 2 * (neven - 1));
        CHECK(shmem_team_translate_pe(SHMEM_TEAM_WORLD, me, even) == me / 2);
        CHECK(shmem_long_sum_reduce(even, dst, src, 1) == 0);
        CHECK(*dst == (long)neven * (neven - 1));
        CHECK(shmem_long_broadcast(even, dst, src, 1, neven - 1) == 0);
        CHECK(*dst == 2L * (neven - 1));
        CHECK(shmem_team_sync(even) == 0);
    } else {
        CHECK(even == SHMEM_TEAM_INVALID);
        CHECK(shmem_team_translate_pe(SHMEM_TEAM_WORLD, me, SHMEM_TEAM_WORLD) == me);
    }
    shmem_barrier_all();
    if (even != SHMEM_TEAM_INVALID) shmem_team_destroy(even);
    shmem_free(dst);
    shmem_free(src);
}

static void allocation(int npes) {
    (void)npes;
    char *a = shmem_align(4096, 100);
    CHECK(a != NULL && (uintptr_t)a % 4096 == 0);
    int next = (me + 1) % shmem_n_pes(), prev = (me + shmem_n_pes() - 1) % shmem_n_pes();
    char msg[100];
    for (int k = 0; k < 100; k++) msg[k] = (char)('a' + (k + me) % 26);
    shmem_char_put(a, msg, 100, next);
    shmem_barrier_all();
    for (int k = 0; k < 100; k++) CHECK(a[k] == (char)('a' + (k + prev) % 26));
    CHECK(shmem_malloc(0) == NULL);
    double *z = shmem_calloc(16, sizeof(double));
    for (int k = 0; k < 16; k++) CHECK(z[k] == 0.0);
    shmem_barrier_all();
    shmem_free(z);
    shmem_free(a);
}

#if defined(__STDC_VERSION__) && __STDC_VERSION__ >= 201112L
static void generic_names(int npes) {
    long *x = shmem_calloc(4, sizeof(long));
    int *f = shmem_calloc(1, sizeof(int));
    int next = (me + 1) % npes;
    long v[2] = {me, me + 1};
    shmem_put(x, v, 2, next);
    shmem_p(&x[2], (long)me * 3, next);
    shmem_barrier_all();
    int prev = (me + npes - 1) % npes;
    CHECK(x[0] == prev && x[1] == prev + 1 && x[2] == prev * 3);
    long w[2];
    shmem_get(w, x, 2, next);
    CHECK(w[0] == me && shmem_g(&x[2], next) == me * 3);
    shmem_atomic_add(&x[3], 1L, 0);
    shmem_barrier_all();
    CHECK(shmem_atomic_fetch(&x[3], 0) == npes);
    CHECK(shmem_atomic_fetch_add(f, 1, me) == 0);
    shmem_wait_until(f, SHMEM_CMP_EQ, 1);
    CHECK(shmem_test(f, SHMEM_CMP_NE, 0));
    shmem_barrier_all();
    shmem_free(f);
    shmem_free(x);
}
#endif

int main(void) {
    shmem_init();
    me = shmem_my_pe();
    int npes = shmem_n_pes();
    CHECK(me >= 0 && me < npes);
    int major = 0, minor = 0;
    shmem_info_get_version(&major, &minor);
    CHECK(major == 1 && minor >= 4);
    char name[SHMEM_MAX_NAME_LEN];
    shmem_info_get_name(name);
    CHECK(strlen(name) > 0);
    CHECK(shmem_pe_accessible(npes - 1) == 1);
    if (getenv("SHMEM_TEST_BAD_ADDRESS") != NULL) {
        /* A put to an object outside the symmetric heap: invalid input,
         * which the implementation may end the job for. */
        long not_symmetric = 0;
        shmem_barrier_all();
        if (me == npes - 1) shmem_long_p(&not_symmetric, 1, 0);
        shmem_barrier_all();
        printf("PE %d: the invalid put returned\n", me);
        return 0;
    }

    put_get(npes);
    atomics(npes);
    collectives(npes);
    teams(npes);
    allocation(npes);
#if defined(__STDC_VERSION__) && __STDC_VERSION__ >= 201112L
    generic_names(npes);
#endif

    shmem_barrier_all();
    printf("rank %d: shmem passed\n", me);
    fflush(stdout);
    shmem_finalize();
    return 0;
}
