/* Bad input never crashes: under MPI_ERRORS_RETURN every bad argument
 * returns its MPI error class. Also truncation (with the prefix
 * delivered), MPI_ERR_IN_STATUS, error strings, user error handlers, and
 * calls after MPI_Finalize. */
#include "check.h"
#include <stdint.h>
#include <string.h>

static int handler_calls, handler_code;
static MPI_Comm handler_comm;

static void my_handler(MPI_Comm *comm, int *code, ...) {
    handler_calls++;
    handler_code = *code;
    handler_comm = *comm;
}

int main(int argc, char **argv) {
    int x = 0, buf[16] = {0}, flag, n, size, len;
    MPI_Status st;
    MPI_Request r;
    OK(MPI_Init(&argc, &argv));
    OK(MPI_Comm_rank(MPI_COMM_WORLD, &check_rank));
    OK(MPI_Comm_size(MPI_COMM_WORLD, &size));
    CHECK(size == 2);
    OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    OK(MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN));
    int peer = 1 - check_rank;

    /* Buffers. */
    FAILS(MPI_ERR_BUFFER, MPI_Send(NULL, 4, MPI_INT, peer, 0, MPI_COMM_WORLD));
    FAILS(MPI_ERR_BUFFER, MPI_Recv(NULL, 4, MPI_INT, peer, 0, MPI_COMM_WORLD, &st));
    FAILS(MPI_ERR_BUFFER, MPI_Isend(NULL, 1, MPI_DOUBLE, peer, 0, MPI_COMM_WORLD, &r));
    OK(MPI_Send(NULL, 0, MPI_INT, MPI_PROC_NULL, 0, MPI_COMM_WORLD));

    /* Communicators. */
    MPI_Comm freed;
    OK(MPI_Comm_dup(MPI_COMM_WORLD, &freed));
    MPI_Comm stale = freed;
    OK(MPI_Comm_free(&freed));
    MPI_Comm bogus[] = {MPI_COMM_NULL, (MPI_Comm)0x12345, (MPI_Comm)MPI_INT, stale, (MPI_Comm)0x7fffffff};
    for (size_t i = 0; i < sizeof bogus / sizeof bogus[0]; i++) {
        FAILS(MPI_ERR_COMM, MPI_Send(&x, 1, MPI_INT, 0, 0, bogus[i]));
        FAILS(MPI_ERR_COMM, MPI_Comm_rank(bogus[i], &n));
    }
    FAILS(MPI_ERR_COMM, MPI_Comm_free(&stale));
    MPI_Comm world = MPI_COMM_WORLD;
    FAILS(MPI_ERR_COMM, MPI_Comm_free(&world));
    FAILS(MPI_ERR_ARG, MPI_Comm_rank(MPI_COMM_WORLD, NULL));
    FAILS(MPI_ERR_ARG, MPI_Comm_split(MPI_COMM_WORLD, -5, 0, &freed));

    /* Ranks. */
    FAILS(MPI_ERR_RANK, MPI_Send(&x, 1, MPI_INT, 2, 0, MPI_COMM_WORLD));
    FAILS(MPI_ERR_RANK, MPI_Send(&x, 1, MPI_INT, -7, 0, MPI_COMM_WORLD));
    FAILS(MPI_ERR_RANK, MPI_Send(&x, 1, MPI_INT, MPI_ANY_SOURCE, 0, MPI_COMM_WORLD));
    FAILS(MPI_ERR_RANK, MPI_Recv(&x, 1, MPI_INT, 5, 0, MPI_COMM_WORLD, &st));
    FAILS(MPI_ERR_RANK, MPI_Irecv(&x, 1, MPI_INT, -9, 0, MPI_COMM_WORLD, &r));
    /* Checked before any packing or staging: a non-contiguous type and a
     * count far beyond the buffer (and beyond memory, packed) must not be
     * touched when the tag or the rank is wrong. */
    {
        MPI_Datatype strided;
        OK(MPI_Type_vector(2, 1, 2, MPI_INT, &strided));
        OK(MPI_Type_commit(&strided));
        FAILS(MPI_ERR_TAG, MPI_Send(&x, 1 << 30, strided, 0, -7, MPI_COMM_WORLD));
        FAILS(MPI_ERR_RANK, MPI_Send(&x, 1 << 30, strided, 99, 0, MPI_COMM_WORLD));
        FAILS(MPI_ERR_TAG, MPI_Recv(&x, 1 << 30, strided, 0, -7, MPI_COMM_WORLD, &st));
        FAILS(MPI_ERR_RANK, MPI_Irecv(&x, 1 << 30, strided, 99, 0, MPI_COMM_WORLD, &r));
        OK(MPI_Type_free(&strided));
    }
    FAILS(MPI_ERR_RANK, MPI_Probe(2, 0, MPI_COMM_WORLD, &st));
    FAILS(MPI_ERR_RANK, MPI_Send(&x, 1, MPI_INT, 1, 0, MPI_COMM_SELF));

    /* Tags. */
    FAILS(MPI_ERR_TAG, MPI_Send(&x, 1, MPI_INT, peer, -5, MPI_COMM_WORLD));
    FAILS(MPI_ERR_TAG, MPI_Send(&x, 1, MPI_INT, peer, MPI_ANY_TAG, MPI_COMM_WORLD));
    FAILS(MPI_ERR_TAG, MPI_Send(&x, 1, MPI_INT, peer, 1 << 30, MPI_COMM_WORLD));
    FAILS(MPI_ERR_TAG, MPI_Recv(&x, 1, MPI_INT, peer, -77, MPI_COMM_WORLD, &st));
    FAILS(MPI_ERR_TAG, MPI_Iprobe(peer, -3, MPI_COMM_WORLD, &flag, &st));

    /* Counts. */
    FAILS(MPI_ERR_COUNT, MPI_Send(&x, -1, MPI_INT, peer, 0, MPI_COMM_WORLD));
    FAILS(MPI_ERR_COUNT, MPI_Recv(&x, -1, MPI_INT, peer, 0, MPI_COMM_WORLD, &st));
    FAILS(MPI_ERR_COUNT, MPI_Type_contiguous(-1, MPI_INT, &freed == NULL ? NULL : (MPI_Datatype *)&n));
    FAILS(MPI_ERR_COUNT, MPI_Waitall(-1, &r, MPI_STATUSES_IGNORE));

    /* Datatypes. */
    MPI_Datatype vec, dead;
    OK(MPI_Type_vector(2, 1, 3, MPI_INT, &vec)); /* not committed */
    OK(MPI_Type_contiguous(2, MPI_INT, &dead));
    MPI_Datatype dead_handle = dead;
    OK(MPI_Type_free(&dead));
    MPI_Datatype bad_types[] = {MPI_DATATYPE_NULL, (MPI_Datatype)0x777, (MPI_Datatype)0x211, vec, dead_handle,
                                (MPI_Datatype)MPI_COMM_WORLD};
    for (size_t i = 0; i < sizeof bad_types / sizeof bad_types[0]; i++) {
        FAILS(MPI_ERR_TYPE, MPI_Send(buf, 1, bad_types[i], peer, 0, MPI_COMM_WORLD));
        FAILS(MPI_ERR_TYPE, MPI_Irecv(buf, 1, bad_types[i], peer, 0, MPI_COMM_WORLD, &r));
    }
    FAILS(MPI_ERR_TYPE, MPI_Type_size(MPI_DATATYPE_NULL, &n));
    FAILS(MPI_ERR_TYPE, MPI_Type_free(&dead_handle));
    MPI_Datatype predefined = MPI_INT;
    FAILS(MPI_ERR_TYPE, MPI_Type_free(&predefined));
    FAILS(MPI_ERR_ARG, MPI_Type_vector(2, -1, 3, MPI_INT, &dead));
    FAILS(MPI_ERR_ARG, MPI_Type_indexed(2, NULL, NULL, MPI_INT, &dead));
    FAILS(MPI_ERR_TYPE, MPI_Type_vector(1 << 30, 1, 2, vec, &dead));
    OK(MPI_Type_free(&vec));

    /* Groups and operations: null, made up, another kind's, freed. */
    {
        MPI_Group made, stale_group;
        OK(MPI_Comm_group(MPI_COMM_WORLD, &made));
        stale_group = made;
        OK(MPI_Group_free(&made));
        MPI_Group bad_groups[] = {MPI_GROUP_NULL, (MPI_Group)0x4444, (MPI_Group)MPI_COMM_WORLD,
                                  (MPI_Group)0x7fffffff, stale_group};
        for (size_t i = 0; i < sizeof bad_groups / sizeof bad_groups[0]; i++) {
            MPI_Group copy = bad_groups[i];
            FAILS(MPI_ERR_GROUP, MPI_Group_size(bad_groups[i], &n));
            FAILS(MPI_ERR_GROUP, MPI_Group_rank(bad_groups[i], &n));
            FAILS(MPI_ERR_GROUP, MPI_Group_free(&copy));
        }
        MPI_Op made_op, stale_op;
        int y = 0;
        OK(MPI_Op_create((MPI_User_function *)my_handler, 1, &made_op));
        stale_op = made_op;
        OK(MPI_Op_free(&made_op));
        MPI_Op bad_ops[] = {MPI_OP_NULL, (MPI_Op)0x4444, (MPI_Op)MPI_INT, (MPI_Op)0x7fffffff, stale_op};
        for (size_t i = 0; i < sizeof bad_ops / sizeof bad_ops[0]; i++) {
            MPI_Op copy = bad_ops[i];
            FAILS(MPI_ERR_OP, MPI_Reduce_local(&x, &y, 1, MPI_INT, bad_ops[i]));
            FAILS(MPI_ERR_OP, MPI_Allreduce(&x, &y, 1, MPI_INT, bad_ops[i], MPI_COMM_SELF));
            FAILS(MPI_ERR_OP, MPI_Op_free(&copy));
        }
        MPI_Op predefined_op = MPI_SUM;
        FAILS(MPI_ERR_OP, MPI_Op_free(&predefined_op));
        /* Error handlers: invalid ones are MPI_ERR_ERRHANDLER. */
        MPI_Errhandler bad_eh = (MPI_Errhandler)0x4444;
        FAILS(MPI_ERR_ERRHANDLER, MPI_Comm_set_errhandler(MPI_COMM_WORLD, bad_eh));
        FAILS(MPI_ERR_ERRHANDLER, MPI_Errhandler_free(&bad_eh));
    }

    /* Requests. */
    MPI_Request junk = (MPI_Request)0x4444, reqs[2];
    FAILS(MPI_ERR_REQUEST, MPI_Wait(&junk, &st));
    FAILS(MPI_ERR_REQUEST, MPI_Test(&junk, &flag, &st));
    FAILS(MPI_ERR_REQUEST, MPI_Cancel(&junk));
    FAILS(MPI_ERR_REQUEST, MPI_Request_free(&junk));
    /* Values with the top bits of a finished receive's handle, but no
     * valid check of the status they would carry: invalid, not success
     * with a made-up status. */
    for (uint64_t low = 0; low < 64; low++) {
        MPI_Request forged = (MPI_Request)(uintptr_t)((UINT64_C(0x2d) << 58) | (low * 0x10001u) | (low << 40));
        FAILS(MPI_ERR_REQUEST, MPI_Wait(&forged, &st));
        FAILS(MPI_ERR_REQUEST, MPI_Test(&forged, &flag, &st));
        MPI_Request two[2] = {MPI_REQUEST_NULL, forged};
        FAILS(MPI_ERR_REQUEST, MPI_Waitall(2, two, MPI_STATUSES_IGNORE));
    }
    OK(MPI_Irecv(&x, 1, MPI_INT, check_rank, 55, MPI_COMM_WORLD, &reqs[0]));
    reqs[1] = (MPI_Request)MPI_COMM_WORLD;
    FAILS(MPI_ERR_REQUEST, MPI_Waitall(2, reqs, MPI_STATUSES_IGNORE));
    CHECK(reqs[0] != MPI_REQUEST_NULL); /* untouched by the failed call */
    OK(MPI_Cancel(&reqs[0]));
    OK(MPI_Wait(&reqs[0], &st));
    OK(MPI_Test_cancelled(&st, &flag));
    CHECK(flag);
    MPI_Message msg = MPI_MESSAGE_NULL;
    FAILS(MPI_ERR_REQUEST, MPI_Mrecv(buf, 1, MPI_INT, &msg, &st));

    /* Groups. */
    MPI_Group g;
    OK(MPI_Comm_group(MPI_COMM_WORLD, &g));
    int dupl[2] = {0, 0}, out_of_range[1] = {2};
    FAILS(MPI_ERR_RANK, MPI_Group_incl(g, 2, dupl, &g == NULL ? NULL : &g));
    FAILS(MPI_ERR_RANK, MPI_Group_excl(g, 1, out_of_range, &g == NULL ? NULL : &g));
    FAILS(MPI_ERR_GROUP, MPI_Group_size(MPI_GROUP_NULL, &n));
    FAILS(MPI_ERR_GROUP, MPI_Group_size((MPI_Group)0x5555, &n));
    OK(MPI_Group_free(&g));
    FAILS(MPI_ERR_GROUP, MPI_Group_free(&g));

    /* Truncation: the prefix arrives, the status says how much. */
    if (check_rank == 0) {
        int ten[10] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9};
        OK(MPI_Send(ten, 10, MPI_INT, 1, 1, MPI_COMM_WORLD));
        OK(MPI_Send(ten, 10, MPI_INT, 1, 2, MPI_COMM_WORLD));
        OK(MPI_Send(ten, 10, MPI_INT, 1, 3, MPI_COMM_WORLD));
        OK(MPI_Send(ten, 1, MPI_INT, 1, 4, MPI_COMM_WORLD));
        OK(MPI_Send(ten, 10, MPI_INT, 1, 5, MPI_COMM_WORLD));
    } else {
        for (int i = 0; i < 16; i++) buf[i] = -1;
        FAILS(MPI_ERR_TRUNCATE, MPI_Recv(buf, 5, MPI_INT, 0, 1, MPI_COMM_WORLD, &st));
        OK(MPI_Get_count(&st, MPI_INT, &n));
        CHECK(n == 5 && buf[4] == 4 && buf[5] == -1 && st.MPI_ERROR == MPI_ERR_TRUNCATE);
        OK(MPI_Irecv(buf, 3, MPI_INT, 0, 2, MPI_COMM_WORLD, &r));
        FAILS(MPI_ERR_TRUNCATE, MPI_Wait(&r, &st));
        CHECK(r == MPI_REQUEST_NULL && buf[2] == 2);
        /* In a set: MPI_ERR_IN_STATUS, each status with its error. */
        MPI_Status sts[2];
        OK(MPI_Irecv(buf, 2, MPI_INT, 0, 3, MPI_COMM_WORLD, &reqs[0]));
        OK(MPI_Irecv(&buf[8], 2, MPI_INT, 0, 4, MPI_COMM_WORLD, &reqs[1]));
        FAILS(MPI_ERR_IN_STATUS, MPI_Waitall(2, reqs, sts));
        CHECK(sts[0].MPI_ERROR == MPI_ERR_TRUNCATE && sts[1].MPI_ERROR == MPI_SUCCESS && buf[8] == 0);
        CHECK(reqs[0] == MPI_REQUEST_NULL && reqs[1] == MPI_REQUEST_NULL);
        /* Without a status to carry it, the error still comes back. */
        FAILS(MPI_ERR_TRUNCATE, MPI_Recv(buf, 4, MPI_INT, 0, 5, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        CHECK(buf[3] == 3);
    }

    /* Null output pointers. */
    FAILS(MPI_ERR_ARG, MPI_Get_count(NULL, MPI_INT, &n));
    FAILS(MPI_ERR_ARG, MPI_Isend(&x, 1, MPI_INT, peer, 0, MPI_COMM_WORLD, NULL));
    FAILS(MPI_ERR_ARG, MPI_Comm_set_name(MPI_COMM_WORLD, NULL));

    /* Error classes and strings. */
    char text[MPI_MAX_ERROR_STRING];
    for (int c = 0; c <= MPI_ERR_ABI; c++) {
        int cls;
        OK(MPI_Error_class(c, &cls));
        CHECK(cls == c);
        OK(MPI_Error_string(c, text, &len));
        CHECK(len > 0 && (size_t)len == strlen(text) && strncmp(text, "MPI_", 4) == 0);
    }
    OK(MPI_Error_string(MPI_ERR_RANK, text, &len));
    CHECK(strstr(text, "MPI_ERR_RANK") != NULL);
    FAILS(MPI_ERR_ARG, MPI_Error_class(-4, &n));
    FAILS(MPI_ERR_ARG, MPI_Error_string(100000, text, &len));

    /* A user error handler on one communicator; freeing the handler
     * handle keeps it attached. */
    MPI_Comm mine;
    MPI_Errhandler eh, got;
    OK(MPI_Comm_dup(MPI_COMM_WORLD, &mine));
    OK(MPI_Comm_create_errhandler(my_handler, &eh));
    OK(MPI_Comm_set_errhandler(mine, eh));
    OK(MPI_Comm_get_errhandler(mine, &got));
    CHECK(got == eh);
    OK(MPI_Errhandler_free(&eh));
    CHECK(eh == MPI_ERRHANDLER_NULL);
    int rc = MPI_Send(&x, 1, MPI_INT, 9, 0, mine);
    CHECK(rc == MPI_ERR_RANK && handler_calls == 1 && handler_code == MPI_ERR_RANK && handler_comm == mine);
    OK(MPI_Comm_call_errhandler(mine, MPI_ERR_OTHER));
    CHECK(handler_calls == 2 && handler_code == MPI_ERR_OTHER);
    /* MPI_COMM_WORLD's handler was not called for that. */
    FAILS(MPI_ERR_RANK, MPI_Send(&x, 1, MPI_INT, 9, 0, MPI_COMM_WORLD));
    CHECK(handler_calls == 2);
    FAILS(MPI_ERR_ERRHANDLER, MPI_Comm_set_errhandler(mine, MPI_ERRHANDLER_NULL));
    OK(MPI_Comm_free(&mine));

    /* A second MPI_Init. */
    FAILS(MPI_ERR_OTHER, MPI_Init(&argc, &argv));

    OK(MPI_Barrier(MPI_COMM_WORLD));
    OK(MPI_Finalize());
    /* After MPI_Finalize, communication is an error (MPI_COMM_SELF's
     * handler returns it). */
    FAILS(MPI_ERR_OTHER, MPI_Send(&x, 1, MPI_INT, peer, 0, MPI_COMM_WORLD));
    /* ... and so is every use of a communicator (MPI allows a few
     * routines after MPI_Finalize; MPI_Comm_rank is not one of them). */
    FAILS(MPI_ERR_OTHER, MPI_Comm_rank(MPI_COMM_WORLD, &x));
    FAILS(MPI_ERR_OTHER, MPI_Comm_size(MPI_COMM_SELF, &x));
    FAILS(MPI_ERR_OTHER, MPI_Finalize());
    /* Datatypes, groups, operations and error handlers are not allowed
     * after MPI_Finalize either... */
    MPI_Datatype late_type;
    MPI_Op late_op = MPI_SUM;
    MPI_Errhandler late_eh;
    FAILS(MPI_ERR_OTHER, MPI_Type_contiguous(2, MPI_INT, &late_type));
    FAILS(MPI_ERR_OTHER, MPI_Type_size(MPI_INT, &x));
    FAILS(MPI_ERR_OTHER, MPI_Group_size(MPI_GROUP_EMPTY, &x));
    FAILS(MPI_ERR_OTHER, MPI_Op_free(&late_op));
    FAILS(MPI_ERR_OTHER, MPI_Comm_create_errhandler(my_handler, &late_eh));
    /* ... while the routines MPI allows then keep working. */
    OK(MPI_Finalized(&flag));
    CHECK(flag);
    OK(MPI_Initialized(&flag));
    CHECK(flag);
    OK(MPI_Error_class(MPI_ERR_TAG, &x));
    CHECK(x == MPI_ERR_TAG);
    OK(MPI_Error_string(MPI_ERR_OTHER, text, &len));
    OK(MPI_Get_version(&x, &n));
    CHECK(x == MPI_VERSION);
    PASSED("errors");
    return 0;
}
