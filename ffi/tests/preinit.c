/* Before MPI_Init only a few routines may be called (MPI 4.1 §11.2): the
 * others raise MPI_ERR_OTHER on the initial error handler,
 * MPI_ERRORS_ARE_FATAL, which ends the process. The allowed ones work. */
#include <mpi.h>
#include <stdio.h>

int main(void) {
    int flag = -1, v, sv, cls, size = 0;
    if (MPI_Initialized(&flag) != MPI_SUCCESS || flag != 0 ||
        MPI_Finalized(&flag) != MPI_SUCCESS || flag != 0 ||
        MPI_Get_version(&v, &sv) != MPI_SUCCESS ||
        MPI_Error_class(MPI_ERR_TAG, &cls) != MPI_SUCCESS || cls != MPI_ERR_TAG) {
        printf("an allowed routine failed before MPI_Init\n");
        return 3;
    }
    printf("allowed routines work\n");
    fflush(stdout);
    int rc = MPI_Type_size(MPI_INT, &size);
    printf("still running after MPI_Type_size before MPI_Init (%d, %d)\n", rc, size);
    return 0;
}
