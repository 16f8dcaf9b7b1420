/* malloc and friends on the node's shared heap: before MPI_Init (attached
 * at load time under the launcher; glibc alone, then moved by realloc),
 * during, and after MPI_Finalize; alignment, zeroing, usable sizes; a
 * block malloc'd by one rank read in place and freed by another; threads;
 * fork. With HMPI_MALLOC=system the C heap stays private (MPI_Alloc_mem
 * is still shared). */
#include "check.h"
#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static int expect_shared;

static int shared(const void *p) {
    int f = -1;
    OK(HMPI_Is_shared(p, &f));
    return f;
}

static void check_block(void *p, size_t n, size_t align) {
    CHECK(p != NULL);
    CHECK(((uintptr_t)p & (align - 1)) == 0);
    CHECK(malloc_usable_size(p) >= n);
    CHECK(shared(p) == expect_shared);
    memset(p, 0xab, n);
}

static void *churn(void *arg) {
    (void)arg;
    void *keep[64] = {0};
    for (int i = 0; i < 4000; i++) {
        int k = (i * 7) % 64;
        free(keep[k]);
        size_t n = (size_t)((i * 2654435761u) % 70000) + 1;
        keep[k] = malloc(n);
        if (!keep[k] || shared(keep[k]) != expect_shared) return (void *)1;
        ((char *)keep[k])[n - 1] = (char)i;
    }
    for (int k = 0; k < 64; k++) free(keep[k]);
    return NULL;
}

int main(int argc, char **argv) {
    if (argc > 1 && strcmp(argv[1], "inherited") == 0) {
        /* Started by a rank with its environment: must not attach to (and
         * corrupt) that rank's arena. */
        void *p = malloc(100);
        int f = -1;
        HMPI_Is_shared(p, &f);
        free(p);
        return f == 0 ? 0 : 1;
    }
    const char *m = getenv("HMPI_MALLOC");
    int system_malloc = m && strcmp(m, "system") == 0;
    int launched = getenv("HMPI_SHM_NAME") != NULL;

    /* Before MPI_Init: shared at once under the launcher, glibc alone. */
    size_t early_n = 3000;
    unsigned char *early = malloc(early_n);
    CHECK(early != NULL);
    for (size_t i = 0; i < early_n; i++) early[i] = (unsigned char)(i * 13);
    CHECK(shared(early) == (launched && !system_malloc));
    if (launched && !system_malloc) {
        int owner;
        OK(HMPI_Heap_owner(early, &owner));
        CHECK(owner == atoi(getenv("HMPI_LOCAL_RANK")));
    }

    OK(MPI_Init(&argc, &argv));
    OK(MPI_Comm_rank(MPI_COMM_WORLD, &check_rank));
    int size;
    OK(MPI_Comm_size(MPI_COMM_WORLD, &size));
    expect_shared = !system_malloc;

    /* realloc keeps the contents; a glibc block moves into the heap. */
    early = realloc(early, 200000);
    CHECK(early != NULL && shared(early) == expect_shared);
    for (size_t i = 0; i < early_n; i++) CHECK(early[i] == (unsigned char)(i * 13));
    early = realloc(early, 100);
    for (size_t i = 0; i < 100; i++) CHECK(early[i] == (unsigned char)(i * 13));
    free(early);

    /* Every size class, alignment and zeroing. */
    for (size_t n = 1; n <= (8u << 20); n = n * 3 + 1) {
        void *p = malloc(n);
        check_block(p, n, 16);
        free(p);
        unsigned char *z = calloc(n, 1);
        CHECK(z != NULL && shared(z) == expect_shared);
        for (size_t i = 0; i < n; i += 1 + n / 1000) CHECK(z[i] == 0);
        CHECK(z[n - 1] == 0);
        free(z);
    }
    for (size_t a = 8; a <= (1u << 20); a *= 4) {
        void *p = NULL;
        CHECK(posix_memalign(&p, a, 1000) == 0);
        check_block(p, 1000, a);
        free(p);
        p = aligned_alloc(a, 3 * a);
        check_block(p, 3 * a, a);
        free(p);
        p = memalign(a, 77);
        check_block(p, 77, a);
        free(p);
    }
    void *v = valloc(5000);
    check_block(v, 5000, 4096);
    free(v);
    void *bad = NULL;
    CHECK(posix_memalign(&bad, 24, 100) == EINVAL);
    errno = 0;
    volatile size_t huge = SIZE_MAX / 2; /* hidden from the compiler's check */
    CHECK(calloc(huge, 4) == NULL && errno == ENOMEM);
    void *z0 = malloc(0);
    CHECK(z0 != NULL);
    free(z0);
    free(NULL);
    /* libc's own allocations (strdup) come from the same heap. */
    char *s = strdup("shared heap");
    CHECK(shared(s) == expect_shared && strcmp(s, "shared heap") == 0);
    free(s);
    /* Reused memory is zeroed by calloc. */
    unsigned char *dirty = malloc(1 << 16);
    memset(dirty, 0xff, 1 << 16);
    free(dirty);
    unsigned char *clean = calloc(1 << 16, 1);
    for (int i = 0; i < (1 << 16); i++) CHECK(clean[i] == 0);
    free(clean);

    /* MPI_Alloc_mem is always the shared heap. */
    void *am;
    OK(MPI_Alloc_mem(1 << 20, MPI_INFO_NULL, &am));
    CHECK(shared(am));
    OK(MPI_Free_mem(am));

    /* A block of rank 0, read in place and freed by rank 1. */
    if (size >= 2 && check_rank < 2 && expect_shared) {
        uint64_t addr;
        size_t n = 1 << 20;
        if (check_rank == 0) {
            unsigned *blk = malloc(n * sizeof(unsigned));
            for (size_t i = 0; i < n; i++) blk[i] = (unsigned)(i * 2654435761u);
            addr = (uint64_t)(uintptr_t)blk;
            OK(MPI_Send(&addr, 1, MPI_UINT64_T, 1, 0, MPI_COMM_WORLD));
        } else {
            OK(MPI_Recv(&addr, 1, MPI_UINT64_T, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
            unsigned *blk = (unsigned *)(uintptr_t)addr;
            int owner;
            OK(HMPI_Heap_owner(blk, &owner));
            CHECK(owner == 0);
            for (size_t i = 0; i < n; i++) CHECK(blk[i] == (unsigned)(i * 2654435761u));
            free(blk); /* back to rank 0's arena */
        }
    }
    OK(MPI_Barrier(MPI_COMM_WORLD));

    /* Threads allocating and freeing at once. */
    pthread_t th[4];
    for (int i = 0; i < 4; i++) CHECK(pthread_create(&th[i], NULL, churn, NULL) == 0);
    for (int i = 0; i < 4; i++) {
        void *r;
        CHECK(pthread_join(th[i], &r) == 0 && r == NULL);
    }

    /* fork: the child allocates from glibc and leaves the parent's blocks
     * alone; the parent's block is intact afterwards. */
    char *mine = malloc(4096);
    memset(mine, 'p', 4096);
    fflush(stdout);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        char *c = malloc(100000);
        if (!c || shared(c)) _exit(10);
        memset(c, 1, 100000);
        free(c);
        free(mine); /* the parent's: ignored */
        char *moved = realloc(malloc(64), 1 << 20);
        if (!moved || shared(moved)) _exit(11);
        free(moved);
        _exit(0);
    }
    int wst;
    CHECK(waitpid(pid, &wst, 0) == pid && WIFEXITED(wst) && WEXITSTATUS(wst) == 0);
    for (int i = 0; i < 4096; i++) CHECK(mine[i] == 'p');
    free(mine);

    /* A program this rank starts (fork + exec, with its environment). */
    pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        execl("/proc/self/exe", argv[0], "inherited", (char *)NULL);
        _exit(12);
    }
    CHECK(waitpid(pid, &wst, 0) == pid && WIFEXITED(wst) && WEXITSTATUS(wst) == 0);

    OK(MPI_Finalize());

    /* After MPI_Finalize: still the shared heap. */
    void *late = malloc(12345);
    check_block(late, 12345, 16);
    late = realloc(late, 1 << 22);
    CHECK(late != NULL && shared(late) == expect_shared);
    free(late);
    PASSED("heap");
    return 0;
}
