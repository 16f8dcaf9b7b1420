/* Ping-pong between ranks 0 and 1 over every size class, with every byte
 * checked: malloc'd buffers (the shared heap: single and synergistic
 * copies), buffers on the stack and in static memory (private: kernel
 * assisted or two copy), blocking, nonblocking, synchronous and
 * send-receive forms. */
#include "check.h"
#include <stdint.h>
#include <string.h>

#define MAXN (4 << 20)

static unsigned char static_buf[1 << 16];

static unsigned char pattern(size_t i, int round) {
    return (unsigned char)((i * 131u + (size_t)round * 7u + (i >> 9)) & 0xff);
}

static void fill(unsigned char *b, size_t n, int round) {
    for (size_t i = 0; i < n; i++) b[i] = pattern(i, round);
}

static void verify(const unsigned char *b, size_t n, int round) {
    for (size_t i = 0; i < n; i++) {
        if (b[i] != pattern(i, round)) {
            fprintf(stderr, "rank %d: byte %zu of %zu is %u, expected %u (round %d)\n",
                    check_rank, i, n, b[i], pattern(i, round), round);
            exit(3);
        }
    }
}

/* One round trip of n bytes: rank 0 sends, rank 1 checks and echoes. */
static void round_trip(unsigned char *sbuf, unsigned char *rbuf, size_t n, int round, int mode) {
    MPI_Status st;
    int count, peer = 1 - check_rank;
    if (check_rank == 0) {
        fill(sbuf, n, round);
        if (mode == 0) {
            OK(MPI_Send(sbuf, (int)n, MPI_BYTE, peer, round, MPI_COMM_WORLD));
        } else if (mode == 1) {
            MPI_Request r;
            OK(MPI_Isend(sbuf, (int)n, MPI_BYTE, peer, round, MPI_COMM_WORLD, &r));
            OK(MPI_Wait(&r, &st));
            CHECK(r == MPI_REQUEST_NULL);
        } else {
            OK(MPI_Ssend(sbuf, (int)n, MPI_BYTE, peer, round, MPI_COMM_WORLD));
        }
        memset(rbuf, 0, n);
        OK(MPI_Recv(rbuf, (int)n, MPI_BYTE, peer, round, MPI_COMM_WORLD, &st));
        OK(MPI_Get_count(&st, MPI_BYTE, &count));
        CHECK((size_t)count == n);
        verify(rbuf, n, round);
    } else {
        memset(rbuf, 0, n);
        if (mode == 1) {
            MPI_Request r;
            int flag = 0;
            OK(MPI_Irecv(rbuf, (int)n, MPI_BYTE, peer, round, MPI_COMM_WORLD, &r));
            while (!flag) OK(MPI_Test(&r, &flag, &st));
            CHECK(r == MPI_REQUEST_NULL);
        } else {
            OK(MPI_Recv(rbuf, (int)n, MPI_BYTE, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &st));
        }
        CHECK(st.MPI_SOURCE == peer && st.MPI_TAG == round);
        OK(MPI_Get_count(&st, MPI_BYTE, &count));
        CHECK((size_t)count == n);
        verify(rbuf, n, round);
        OK(MPI_Send(rbuf, (int)n, MPI_BYTE, peer, round, MPI_COMM_WORLD));
    }
}

int main(int argc, char **argv) {
    int size, round = 0;
    OK(MPI_Init(&argc, &argv));
    OK(MPI_Comm_rank(MPI_COMM_WORLD, &check_rank));
    OK(MPI_Comm_size(MPI_COMM_WORLD, &size));
    CHECK(size == 2);

    unsigned char *a = malloc(MAXN), *b = malloc(MAXN);
    CHECK(a && b);
    int shared;
    OK(HMPI_Is_shared(a, &shared));
    CHECK(shared);

    /* Every size from 0 to 300 (immediate and its edges), then powers of
     * two and their neighbours up to 4 MiB. */
    for (size_t n = 0; n <= 300; n++, round++) round_trip(a, b, n, round, (int)(n % 3));
    for (size_t p = 512; p <= MAXN; p *= 2) {
        size_t sizes[3] = {p - 1, p, p + 1};
        for (int k = 0; k < 3; k++, round++) {
            size_t n = sizes[k] > MAXN ? MAXN : sizes[k];
            round_trip(a, b, n, round, round % 3);
        }
    }

    /* Private buffers: stack and static memory. */
    {
        unsigned char stack_buf[1 << 15];
        size_t sizes[] = {1, 200, 257, 4096, 20000, sizeof stack_buf};
        for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++, round++) {
            round_trip(stack_buf, static_buf, sizes[k], round, round % 3);
            round_trip(static_buf, a, sizes[k], round, round % 3);
        }
    }

    /* MPI_Sendrecv in both directions at once, every element checked. */
    {
        int n = 100000, peer = 1 - check_rank;
        int *out = malloc(n * sizeof(int)), *in = malloc(n * sizeof(int));
        for (int i = 0; i < n; i++) out[i] = check_rank * 1000000 + i;
        MPI_Status st;
        OK(MPI_Sendrecv(out, n, MPI_INT, peer, 5, in, n, MPI_INT, peer, 5, MPI_COMM_WORLD, &st));
        CHECK(st.MPI_SOURCE == peer && st.MPI_TAG == 5);
        for (int i = 0; i < n; i++) CHECK(in[i] == peer * 1000000 + i);
        /* MPI_Sendrecv_replace: the buffer goes out and comes back swapped. */
        OK(MPI_Sendrecv_replace(out, n, MPI_INT, peer, 6, peer, 6, MPI_COMM_WORLD, &st));
        for (int i = 0; i < n; i++) CHECK(out[i] == peer * 1000000 + i);
        free(out);
        free(in);
    }

    /* Large doubles (synergistic copy range), checked element by element. */
    {
        int n = 3 << 20;
        double *d = malloc((size_t)n * sizeof(double));
        if (check_rank == 0) {
            for (int i = 0; i < n; i++) d[i] = i * 0.5;
            OK(MPI_Send(d, n, MPI_DOUBLE, 1, 99, MPI_COMM_WORLD));
        } else {
            OK(MPI_Recv(d, n, MPI_DOUBLE, 0, 99, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
            for (int i = 0; i < n; i++) CHECK(d[i] == i * 0.5);
        }
        free(d);
    }

    free(a);
    free(b);
    OK(MPI_Finalize());
    PASSED("pingpong");
    return 0;
}
