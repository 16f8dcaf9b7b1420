/* Before MPI_Init only a few routines may be called (MPI 4.1 §11.2): the
 * others raise MPI_ERR_OTHER on the initial error handler,
 * MPI_ERRORS_ARE_FATAL, which ends the process. The allowed ones work.
 * PREINIT_CALL names the routine that must end it (default:
 * MPI_Type_size); the request routines are among them, even on
 * MPI_REQUEST_NULL. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(void) {
    int flag = -1, v, sv, cls, size = 0, index;
    if (MPI_Initialized(&flag) != MPI_SUCCESS || flag != 0 ||
        MPI_Finalized(&flag) != MPI_SUCCESS || flag != 0 ||
        MPI_Get_version(&v, &sv) != MPI_SUCCESS ||
        MPI_Error_class(MPI_ERR_TAG, &cls) != MPI_SUCCESS || cls != MPI_ERR_TAG) {
        printf("an allowed routine failed before MPI_Init\n");
        return 3;
    }
    printf("allowed routines work\n");
    fflush(stdout);
    const char *call = getenv("PREINIT_CALL");
    MPI_Request null = MPI_REQUEST_NULL, two[2] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL};
    MPI_Status st;
    int rc;
    if (call == NULL || strcmp(call, "MPI_Type_size") == 0) {
        rc = MPI_Type_size(MPI_INT, &size);
    } else if (strcmp(call, "MPI_Wait") == 0) {
        rc = MPI_Wait(&null, &st);
    } else if (strcmp(call, "MPI_Test") == 0) {
        rc = MPI_Test(&null, &flag, &st);
    } else if (strcmp(call, "MPI_Waitany") == 0) {
        rc = MPI_Waitany(2, two, &index, &st);
    } else if (strcmp(call, "MPI_Request_free") == 0) {
        rc = MPI_Request_free(&null);
    } else if (strcmp(call, "MPI_Cancel") == 0) {
        rc = MPI_Cancel(&null);
    } else if (strcmp(call, "MPI_Start") == 0) {
        rc = MPI_Start(&null);
    } else {
        printf("no routine %s here\n", call);
        return 4;
    }
    printf("still running after %s before MPI_Init (%d, %d)\n", call ? call : "MPI_Type_size", rc, size);
    return 0;
}
