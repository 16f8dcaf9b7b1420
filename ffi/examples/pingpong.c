/* Ping-pong latency and streaming bandwidth between ranks 0 and 1, in C
 * over libhmpi: the loops and iteration counts of the OSU micro-benchmarks
 * (osu_latency, osu_bw), as hmpi-bench's `latency` and `bw` workloads run
 * them, so the numbers compare with hmpi-bench's.
 *
 *   latency (us)     one-way: a ping-pong's round trip / 2; 10000
 *                    iterations after 100 warm-up ones up to 8 KiB, 1000
 *                    after 10 above
 *   bandwidth (MB/s) a window of 64 MPI_Isend + MPI_Waitall, then a 4-byte
 *                    acknowledgement; 100 windows after 10 up to 8 KiB, 20
 *                    after 2 above; 10^6 bytes per second
 *
 * Each size runs its warm-up, then 5 timed repetitions (each after a
 * barrier); the median is printed. Buffers are page aligned and malloc'd,
 * so they are in the node's shared heap: a message is copied once.
 *
 *   hmpicc -O2 -o pingpong ffi/examples/pingpong.c
 *   hmpirun -n 2 ./pingpong [max-bytes | size,size,...]
 *
 * Without an argument: 0, then powers of two up to 4 MiB; a number: the
 * same up to it; a comma-separated list: just those sizes.
 *
 * HMPI_PINGPONG_QUICK=1 divides the iteration counts by 10 and runs 3
 * repetitions of a few sizes. */
#define _POSIX_C_SOURCE 200809L
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { WINDOW = 64, LARGE = 8192, TAG_PING = 1, TAG_DATA = 100, TAG_ACK = 101 };

static int rank;
static unsigned char *sbuf, *rbuf;

static void die(const char *what) {
    fprintf(stderr, "pingpong: %s failed\n", what);
    MPI_Abort(MPI_COMM_WORLD, 1);
}

#define MPI(call) do { if ((call) != MPI_SUCCESS) die(#call); } while (0)

static double latency(int size, int iters) {
    double t0 = MPI_Wtime();
    for (int i = 0; i < iters; i++) {
        if (rank == 0) {
            MPI(MPI_Send(sbuf, size, MPI_CHAR, 1, TAG_PING, MPI_COMM_WORLD));
            MPI(MPI_Recv(rbuf, size, MPI_CHAR, 1, TAG_PING, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        } else {
            MPI(MPI_Recv(rbuf, size, MPI_CHAR, 0, TAG_PING, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
            MPI(MPI_Send(sbuf, size, MPI_CHAR, 0, TAG_PING, MPI_COMM_WORLD));
        }
    }
    return (MPI_Wtime() - t0) * 1e6 / (2.0 * iters);
}

static double bandwidth(int size, int iters) {
    MPI_Request req[WINDOW];
    double t0 = MPI_Wtime();
    for (int i = 0; i < iters; i++) {
        if (rank == 0) {
            for (int w = 0; w < WINDOW; w++)
                MPI(MPI_Isend(sbuf, size, MPI_CHAR, 1, TAG_DATA, MPI_COMM_WORLD, &req[w]));
            MPI(MPI_Waitall(WINDOW, req, MPI_STATUSES_IGNORE));
            MPI(MPI_Recv(rbuf, 4, MPI_CHAR, 1, TAG_ACK, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        } else {
            for (int w = 0; w < WINDOW; w++)
                MPI(MPI_Irecv(rbuf, size, MPI_CHAR, 0, TAG_DATA, MPI_COMM_WORLD, &req[w]));
            MPI(MPI_Waitall(WINDOW, req, MPI_STATUSES_IGNORE));
            MPI(MPI_Send(sbuf, 4, MPI_CHAR, 0, TAG_ACK, MPI_COMM_WORLD));
        }
    }
    double secs = MPI_Wtime() - t0;
    return (double)size * WINDOW * iters / secs / 1e6;
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Warm-up, then `reps` timed runs after a barrier each; the median. */
static double measure(double (*kernel)(int, int), int size, int iters, int skip, int reps) {
    double v[8];
    kernel(size, skip);
    for (int r = 0; r < reps; r++) {
        MPI(MPI_Barrier(MPI_COMM_WORLD));
        v[r] = kernel(size, iters);
    }
    qsort(v, (size_t)reps, sizeof v[0], cmp);
    return v[reps / 2];
}

int main(int argc, char **argv) {
    int size;
    MPI(MPI_Init(&argc, &argv));
    MPI(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    MPI(MPI_Comm_size(MPI_COMM_WORLD, &size));
    if (size != 2) {
        if (rank == 0) fprintf(stderr, "pingpong needs 2 ranks: hmpirun -n 2 %s\n", argv[0]);
        MPI_Finalize();
        return 1;
    }
    const char *q = getenv("HMPI_PINGPONG_QUICK");
    int quick = q && strcmp(q, "0") != 0;
    int div = quick ? 10 : 1, reps = quick ? 3 : 5;
    long max = argc > 1 ? atol(argv[1]) : 4L << 20;
    long list[64];
    int nlist = 0;
    if (argc > 1 && strchr(argv[1], ',')) {
        max = 0;
        for (char *p = argv[1]; *p && nlist < 64; p++) {
            list[nlist] = strtol(p, &p, 10);
            if (list[nlist] < 0 || list[nlist] > (64L << 20)) die("a size in the list");
            if (list[nlist] > max) max = list[nlist];
            nlist++;
            if (*p != ',') break;
        }
        if (max < 1) max = 1;
    } else if (max < 1 || max > (64L << 20)) {
        max = 4L << 20;
    }
    if (posix_memalign((void **)&sbuf, 4096, (size_t)max) || posix_memalign((void **)&rbuf, 4096, (size_t)max))
        die("posix_memalign");
    memset(sbuf, 'a', (size_t)max);
    memset(rbuf, 'b', (size_t)max);
    int shared = 0;
    HMPI_Is_shared(sbuf, &shared);
    if (rank == 0) {
        printf("# hmpi C ping-pong over libhmpi (OSU loops), median of %d runs; buffers %s\n", reps,
               shared ? "in the shared heap" : "private");
        printf("%12s %16s %18s\n", "bytes", "latency (us)", "bandwidth (MB/s)");
    }
    for (int k = 0;; k++) {
        long s;
        if (nlist) {
            if (k == nlist) break;
            s = list[k];
        } else {
            s = k == 0 ? 0 : 1L << (k - 1);
            if (s > max) break;
        }
        if (!nlist && quick && s != 0 && s != 8 && s != 1024 && s != 65536 && s != (1 << 20) && s != max)
            continue;
        int lat_iters = (s > LARGE ? 1000 : 10000) / div, lat_skip = (s > LARGE ? 10 : 100) / div;
        int bw_iters = (s > LARGE ? 20 : 100) / div, bw_skip = (s > LARGE ? 2 : 10) / div;
        if (lat_skip < 1) lat_skip = 1;
        if (bw_iters < 1) bw_iters = 1;
        if (bw_skip < 1) bw_skip = 1;
        double lat = measure(latency, (int)s, lat_iters, lat_skip, reps);
        double bw = s > 0 ? measure(bandwidth, (int)s, bw_iters, bw_skip, reps) : 0.0;
        if (rank == 0) {
            if (s > 0)
                printf("%12ld %16.3f %18.1f\n", s, lat, bw);
            else
                printf("%12ld %16.3f %18s\n", s, lat, "-");
            fflush(stdout);
        }
    }
    free(sbuf);
    free(rbuf);
    MPI(MPI_Finalize());
    return 0;
}
