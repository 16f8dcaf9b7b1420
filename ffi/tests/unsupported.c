/* The routines of the standard ABI that libhmpi does not implement are
 * exported and refuse honestly: under MPI_ERRORS_RETURN they return
 * MPI_ERR_UNSUPPORTED_OPERATION, through the error handler of their
 * communicator, or of MPI_COMM_WORLD when they have none (windows and
 * files included); they do nothing else. Tool routines return
 * MPI_T_ERR_NOT_SUPPORTED without an error handler; MPI_Pcontrol does
 * nothing and succeeds.
 *
 * With HMPI_TEST_FATAL set, rank 1 calls MPI_Comm_accept under the default
 * handler (MPI_ERRORS_ARE_FATAL), which must end the job; rank 0 waits for
 * a message that never comes. */
#include "check.h"
#include <stdlib.h>
#include <string.h>

#define REFUSED(call)                                                         \
    do {                                                                      \
        int rc_ = (call);                                                     \
        if (rc_ != MPI_ERR_UNSUPPORTED_OPERATION) {                           \
            fprintf(stderr, "rank %d: %s:%d: %s returned %d\n", check_rank,   \
                    __FILE__, __LINE__, #call, rc_);                          \
            exit(3);                                                          \
        }                                                                     \
    } while (0)

static int handled_code;
static MPI_Comm handled_comm = MPI_COMM_NULL;

static void record(MPI_Comm *comm, int *code, ...) {
    handled_comm = *comm;
    handled_code = *code;
}

int main(int argc, char **argv) {
    int rank, size, x = 1, y = 0, flag = -1;
    /* Tool routines never call an error handler, not even the initial
     * MPI_ERRORS_ARE_FATAL before MPI_Init. */
    CHECK(MPI_T_init_thread(MPI_THREAD_SINGLE, &flag) == MPI_T_ERR_NOT_SUPPORTED);
    CHECK(PMPI_T_finalize() == MPI_T_ERR_NOT_SUPPORTED);

    OK(MPI_Init(&argc, &argv));
    OK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    OK(MPI_Comm_size(MPI_COMM_WORLD, &size));
    check_rank = rank;

    if (getenv("HMPI_TEST_FATAL")) {
        if (rank == 1) {
            MPI_Comm port_comm;
            MPI_Comm_accept("no port", MPI_INFO_NULL, 0, MPI_COMM_WORLD, &port_comm);
            printf("rank 1: still running after a refused call\n");
            return 0;
        }
        MPI_Recv(&x, 1, MPI_INT, 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        MPI_Finalize();
        return 0;
    }

    /* MPI_Pcontrol has no profiler to tell: it does nothing, whatever the
     * extra arguments. */
    OK(MPI_Pcontrol(1));
    OK(MPI_Pcontrol(2, "phase", 3.5));
    OK(PMPI_Pcontrol(0));

    /* MPI_ERRORS_RETURN on MPI_COMM_WORLD only. */
    OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));

    /* With a communicator argument: its handler. */
    MPI_Comm port_comm = MPI_COMM_NULL;
    REFUSED(MPI_Comm_accept("no port", MPI_INFO_NULL, 0, MPI_COMM_WORLD, &port_comm));
    REFUSED(PMPI_Comm_accept("no port", MPI_INFO_NULL, 0, MPI_COMM_WORLD, &port_comm));
    CHECK(port_comm == MPI_COMM_NULL);
    MPI_Comm dup;
    MPI_Errhandler eh;
    OK(MPI_Comm_dup(MPI_COMM_WORLD, &dup));
    OK(MPI_Comm_create_errhandler(record, &eh));
    OK(MPI_Comm_set_errhandler(dup, eh));
    REFUSED(MPI_Comm_connect("no port", MPI_INFO_NULL, 0, dup, &port_comm));
    CHECK(handled_code == MPI_ERR_UNSUPPORTED_OPERATION && handled_comm == dup);
    handled_code = 0;
    REFUSED(MPI_Comm_accept("no port", MPI_INFO_NULL, 0, MPI_COMM_WORLD, &port_comm));
    CHECK(handled_code == 0);
    /* An invalid communicator: MPI_COMM_WORLD's handler. */
    MPI_Comm child = MPI_COMM_NULL;
    REFUSED(MPI_Comm_spawn("true", MPI_ARGV_NULL, 1, MPI_INFO_NULL, 0, MPI_COMM_NULL, &child, MPI_ERRCODES_IGNORE));
    CHECK(child == MPI_COMM_NULL);
    CHECK(handled_code == 0);

    /* A large-count variant, and a refused routine on a communicator
     * with a handler of its own; neither sends anything. */
    REFUSED(MPI_Register_datarep_c("native16", NULL, NULL, NULL, NULL));
    CHECK(handled_code == 0);
    REFUSED(MPI_Comm_spawn("true", MPI_ARGV_NULL, 1, MPI_INFO_NULL, 0, dup, &child, MPI_ERRCODES_IGNORE));
    CHECK(handled_code == MPI_ERR_UNSUPPORTED_OPERATION);
    OK(MPI_Iprobe(rank, 0, MPI_COMM_WORLD, &flag, MPI_STATUS_IGNORE));
    CHECK(flag == 0);

    /* Ports, files
     * (none can exist) and routines without a communicator:
     * MPI_COMM_WORLD's handler; a refused one with a communicator: its. */
    handled_code = 0;
    REFUSED(MPI_Close_port("no port"));
    CHECK(handled_code == 0);
    REFUSED(MPI_Comm_accept("no port", MPI_INFO_NULL, 0, dup, &port_comm));
    CHECK(handled_code == MPI_ERR_UNSUPPORTED_OPERATION);
    handled_code = 0;
    MPI_File fh = MPI_FILE_NULL;
    REFUSED(MPI_File_open(MPI_COMM_WORLD, "unsupported.dat", MPI_MODE_RDONLY, MPI_INFO_NULL, &fh));
    REFUSED(MPI_File_close(&fh));
    char port[MPI_MAX_PORT_NAME] = "";
    REFUSED(MPI_Open_port(MPI_INFO_NULL, port));
    CHECK(port[0] == 0);
    REFUSED(MPI_Close_port(port));
    REFUSED(MPI_Register_datarep("native16", NULL, NULL, NULL, NULL));
    CHECK(handled_code == 0);

    /* The code is its own class, with a string that says so. */
    int cls = -1, len = 0;
    char text[MPI_MAX_ERROR_STRING];
    OK(MPI_Error_class(MPI_ERR_UNSUPPORTED_OPERATION, &cls));
    CHECK(cls == MPI_ERR_UNSUPPORTED_OPERATION);
    OK(MPI_Error_string(MPI_ERR_UNSUPPORTED_OPERATION, text, &len));
    CHECK(len == (int)strlen(text) && strstr(text, "MPI_ERR_UNSUPPORTED_OPERATION") != NULL);
    CHECK(strstr(text, "unsupported") != NULL || strstr(text, "not supported") != NULL);

    /* The implemented routines go on working. */
    int next = (rank + 1) % size, prev = (rank + size - 1) % size;
    OK(MPI_Sendrecv(&rank, 1, MPI_INT, next, 5, &y, 1, MPI_INT, prev, 5, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
    CHECK(y == prev);
    OK(MPI_Comm_free(&dup));
    OK(MPI_Errhandler_free(&eh));
    OK(MPI_Finalize());
    PASSED("unsupported");
    return 0;
}
