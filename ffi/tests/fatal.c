/* The default error handler is MPI_ERRORS_ARE_FATAL: a bad rank ends the
 * job. Rank 1 sends to a rank that does not exist; rank 0 waits for a
 * message that never comes (the launcher ends it). */
#include <mpi.h>
#include <stdio.h>

int main(int argc, char **argv) {
    int rank, x = 1;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (rank == 1) {
        MPI_Send(&x, 1, MPI_INT, 7, 0, MPI_COMM_WORLD);
        printf("rank 1: still running after a fatal error\n");
        return 0;
    }
    MPI_Recv(&x, 1, MPI_INT, 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    MPI_Finalize();
    return 0;
}
