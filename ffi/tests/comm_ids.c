/* Many communicators made and freed: 20,000 MPI_Comm_dup + MPI_Comm_free
 * pairs with a few communicators alive throughout all succeed (context ids
 * are reused after free: hmpi-core's unit test `freed_context_ids_are_reused`
 * checks the reuse itself), and traffic on a communicator made afterwards,
 * likely on a reused id, never meets an older communicator's. The time per
 * pair of the first and last blocks of 1,000 is printed, not checked: on a
 * shared machine a timed assertion fails for reasons of its own. */
#include "check.h"

enum { PAIRS = 20000, BLOCK = 1000, KEEP = 8 };

static double min2(double a, double b) { return a < b ? a : b; }

int main(int argc, char **argv) {
    int size, x;
    OK(MPI_Init(&argc, &argv));
    OK(MPI_Comm_rank(MPI_COMM_WORLD, &check_rank));
    OK(MPI_Comm_size(MPI_COMM_WORLD, &size));
    int peer = (check_rank + 1) % size, from = (check_rank + size - 1) % size;

    MPI_Comm kept[KEEP];
    for (int i = 0; i < KEEP; i++) OK(MPI_Comm_dup(MPI_COMM_WORLD, &kept[i]));

    enum { BLOCKS = PAIRS / BLOCK };
    double t[BLOCKS];
    for (int b = 0; b < BLOCKS; b++) {
        OK(MPI_Barrier(MPI_COMM_WORLD));
        double t0 = MPI_Wtime();
        for (int i = 0; i < BLOCK; i++) {
            MPI_Comm c;
            OK(MPI_Comm_dup(MPI_COMM_WORLD, &c));
            OK(MPI_Comm_free(&c));
        }
        t[b] = MPI_Wtime() - t0;
    }

    /* A message on a new communicator (likely on a reused id) is not seen
     * on the kept ones. */
    MPI_Comm c;
    OK(MPI_Comm_dup(MPI_COMM_WORLD, &c));
    OK(MPI_Sendrecv(&check_rank, 1, MPI_INT, peer, 3, &x, 1, MPI_INT, from, 3, c, MPI_STATUS_IGNORE));
    CHECK(x == from);
    for (int i = 0; i < KEEP; i++) {
        int flag;
        OK(MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, kept[i], &flag, MPI_STATUS_IGNORE));
        CHECK(!flag);
        OK(MPI_Comm_free(&kept[i]));
    }
    OK(MPI_Comm_free(&c));

    /* The best of three blocks on each side, for the record. */
    double first = min2(t[0], min2(t[1], t[2]));
    double last = min2(t[BLOCKS - 3], min2(t[BLOCKS - 2], t[BLOCKS - 1]));
    if (check_rank == 0)
        printf("dup+free: first %.2f us, last %.2f us per pair\n", first * 1e6 / BLOCK, last * 1e6 / BLOCK);

    OK(MPI_Finalize());
    PASSED("comm_ids");
    return 0;
}
