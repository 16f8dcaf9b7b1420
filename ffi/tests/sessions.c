/* Sessions (MPI 4.0): the process sets, a communicator made from the
 * world set's group with a collective and point-to-point on it, one of
 * the self set, an intercommunicator from two groups, session error
 * handlers and the session buffer. Without SESSIONS_WITH_INIT the program
 * never calls MPI_Init (two sessions hold the runtime, one after the
 * other ends); with it, MPI_Init comes before the first session (or just
 * after it, with SESSIONS_WITH_INIT=late) and MPI_Finalize before the last
 * session ends, which keeps the runtime going. */
#include "check.h"

#include <stdint.h>
#include <string.h>

static int handled;
static MPI_Session handled_session;

static void on_session_error(MPI_Session *s, int *code, ...) {
    handled_session = *s;
    handled = *code;
}

static void on_comm_error(MPI_Comm *c, int *code, ...) {
    (void)c;
    (void)code;
}

/* A communicator made from a group: its rank, size, an allreduce and a
 * ring exchange on it. */
static void use_comm(MPI_Comm comm, int expect_size) {
    int rank, size;
    OK(MPI_Comm_rank(comm, &rank));
    OK(MPI_Comm_size(comm, &size));
    CHECK(size == expect_size);
    int sum = -1;
    OK(MPI_Allreduce(&rank, &sum, 1, MPI_INT, MPI_SUM, comm));
    CHECK(sum == size * (size - 1) / 2);
    int next = (rank + 1) % size, prev = (rank + size - 1) % size, got = -1;
    OK(MPI_Sendrecv(&rank, 1, MPI_INT, next, 3, &got, 1, MPI_INT, prev, 3, comm, MPI_STATUS_IGNORE));
    CHECK(got == prev);
    OK(MPI_Barrier(comm));
}

int main(void) {
    /* SESSIONS_WITH_INIT=first: MPI_Init before the first session;
     * =late: after it (the session started the runtime). */
    const char *mode = getenv("SESSIONS_WITH_INIT");
    const int with_init = mode != NULL;
    const int late = with_init && strcmp(mode, "late") == 0;
    int flag = 0;
    if (with_init && !late) {
        OK(MPI_Init(NULL, NULL));
        OK(MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN));
    }
    MPI_Session s = MPI_SESSION_NULL, other = MPI_SESSION_NULL;
    OK(MPI_Session_init(MPI_INFO_NULL, MPI_ERRORS_RETURN, &s));
    CHECK(s != MPI_SESSION_NULL);
    if (late) {
        OK(MPI_Initialized(&flag));
        CHECK(!flag);
        OK(MPI_Init(NULL, NULL));
        OK(MPI_Initialized(&flag));
        CHECK(flag);
        OK(MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN));
    }
    MPI_Info hints;
    OK(MPI_Info_create(&hints));
    OK(MPI_Info_set(hints, "org.hmpi.test", "yes"));
    OK(MPI_Session_init(hints, MPI_ERRORS_RETURN, &other));
    OK(MPI_Info_free(&hints));
    CHECK(other != s);

    /* The process sets. */
    int n = 0;
    OK(MPI_Session_get_num_psets(s, MPI_INFO_NULL, &n));
    CHECK(n == 2);
    char name[MPI_MAX_PSET_NAME_LEN];
    int len = 0;
    OK(MPI_Session_get_nth_pset(s, MPI_INFO_NULL, 0, &len, NULL));
    CHECK(len == (int)strlen("mpi://WORLD") + 1);
    len = sizeof name;
    OK(MPI_Session_get_nth_pset(s, MPI_INFO_NULL, 0, &len, name));
    CHECK(strcmp(name, "mpi://WORLD") == 0 && len == (int)strlen("mpi://WORLD") + 1);
    len = sizeof name;
    OK(MPI_Session_get_nth_pset(s, MPI_INFO_NULL, 1, &len, name));
    CHECK(strcmp(name, "mpi://SELF") == 0 && len == (int)strlen("mpi://SELF") + 1);
    len = 5; /* truncated, NUL-terminated; the size needed comes back */
    OK(MPI_Session_get_nth_pset(s, MPI_INFO_NULL, 1, &len, name));
    CHECK(strcmp(name, "mpi:") == 0 && len == (int)strlen("mpi://SELF") + 1);
    len = sizeof name;
    FAILS(MPI_ERR_ARG, MPI_Session_get_nth_pset(s, MPI_INFO_NULL, 2, &len, name));
    FAILS(MPI_ERR_ARG, MPI_Session_get_nth_pset(s, MPI_INFO_NULL, -1, &len, name));

    MPI_Info info;
    char value[MPI_MAX_INFO_VAL];
    int vlen = sizeof value;
    OK(MPI_Session_get_pset_info(s, "mpi://WORLD", &info));
    OK(MPI_Info_get_string(info, "mpi_size", &vlen, value, &flag));
    CHECK(flag);
    const int size = atoi(value);
    CHECK(size >= 1);
    OK(MPI_Info_free(&info));
    vlen = sizeof value;
    OK(MPI_Session_get_pset_info(s, "mpi://SELF", &info));
    OK(MPI_Info_get_string(info, "mpi_size", &vlen, value, &flag));
    CHECK(flag && strcmp(value, "1") == 0);
    OK(MPI_Info_free(&info));
    FAILS(MPI_ERR_ARG, MPI_Session_get_pset_info(s, "mpi://nowhere", &info));

    /* The session's info: the thread level, and the hints it was given. */
    vlen = sizeof value;
    OK(MPI_Session_get_info(other, &info));
    OK(MPI_Info_get_string(info, "thread_level", &vlen, value, &flag));
    CHECK(flag && strcmp(value, "MPI_THREAD_MULTIPLE") == 0);
    vlen = sizeof value;
    OK(MPI_Info_get_string(info, "org.hmpi.test", &vlen, value, &flag));
    CHECK(flag && strcmp(value, "yes") == 0);
    OK(MPI_Info_free(&info));

    /* A communicator of the world set. */
    MPI_Group world_group;
    OK(MPI_Group_from_session_pset(s, "mpi://WORLD", &world_group));
    int gsize = 0, grank = -1;
    OK(MPI_Group_size(world_group, &gsize));
    OK(MPI_Group_rank(world_group, &grank));
    CHECK(gsize == size && grank >= 0 && grank < size);
    check_rank = grank;
    MPI_Comm comm = MPI_COMM_NULL;
    OK(MPI_Comm_create_from_group(world_group, "org.hmpi.test.sessions", MPI_INFO_NULL, MPI_ERRORS_RETURN, &comm));
    CHECK(comm != MPI_COMM_NULL);
    int rank = -1;
    OK(MPI_Comm_rank(comm, &rank));
    CHECK(rank == grank);
    use_comm(comm, size);
    MPI_Errhandler eh = MPI_ERRHANDLER_NULL;
    OK(MPI_Comm_get_errhandler(comm, &eh));
    CHECK(eh == MPI_ERRORS_RETURN);
    FAILS(MPI_ERR_RANK, MPI_Send(&rank, 1, MPI_INT, size, 0, comm));
    /* Another one of the same group (another tag), from the other session. */
    MPI_Group again;
    OK(MPI_Group_from_session_pset(other, "mpi://world", &again));
    int cmp = -1;
    OK(MPI_Group_compare(world_group, again, &cmp));
    CHECK(cmp == MPI_IDENT);
    MPI_Comm comm2;
    OK(MPI_Comm_create_from_group(again, "org.hmpi.test.second", MPI_INFO_NULL, MPI_ERRORS_RETURN, &comm2));
    OK(MPI_Comm_compare(comm, comm2, &cmp));
    CHECK(cmp == MPI_CONGRUENT);
    use_comm(comm2, size);
    OK(MPI_Comm_free(&comm2));
    OK(MPI_Group_free(&again));
    /* The other session ends; the first keeps the runtime going. */
    OK(MPI_Session_finalize(&other));
    CHECK(other == MPI_SESSION_NULL);
    use_comm(comm, size);

    /* The self set. */
    MPI_Group self_group;
    OK(MPI_Group_from_session_pset(s, "mpi://SELF", &self_group));
    MPI_Comm self_comm;
    OK(MPI_Comm_create_from_group(self_group, "org.hmpi.test.self", MPI_INFO_NULL, MPI_ERRORS_RETURN, &self_comm));
    use_comm(self_comm, 1);
    OK(MPI_Comm_free(&self_comm));
    OK(MPI_Group_free(&self_group));

    /* An intercommunicator of the even and the odd ranks. */
    if (size >= 2) {
        int evens[8], odds[8], ne = 0, no = 0;
        for (int r = 0; r < size && r < 16; r++) {
            if (r % 2 == 0) {
                evens[ne++] = r;
            } else {
                odds[no++] = r;
            }
        }
        MPI_Group even, odd;
        OK(MPI_Group_incl(world_group, ne, evens, &even));
        OK(MPI_Group_incl(world_group, no, odds, &odd));
        const int mine_even = rank % 2 == 0;
        MPI_Comm inter = MPI_COMM_NULL;
        OK(MPI_Intercomm_create_from_groups(mine_even ? even : odd, 0, mine_even ? odd : even, 0,
                                            "org.hmpi.test.inter", MPI_INFO_NULL, MPI_ERRORS_RETURN, &inter));
        OK(MPI_Comm_test_inter(inter, &flag));
        CHECK(flag);
        int rsize = 0, lsize = 0;
        OK(MPI_Comm_remote_size(inter, &rsize));
        OK(MPI_Comm_size(inter, &lsize));
        CHECK(lsize == (mine_even ? ne : no) && rsize == (mine_even ? no : ne));
        int lrank = -1;
        OK(MPI_Comm_rank(inter, &lrank));
        CHECK(lrank == rank / 2);
        if (lrank == 0) {
            /* The leaders swap their world ranks. */
            int got = -1;
            OK(MPI_Sendrecv(&rank, 1, MPI_INT, 0, 9, &got, 1, MPI_INT, 0, 9, inter, MPI_STATUS_IGNORE));
            CHECK(got == (mine_even ? 1 : 0));
        }
        OK(MPI_Comm_free(&inter));
        /* Overlapping groups are refused. */
        FAILS(MPI_ERR_GROUP, MPI_Intercomm_create_from_groups(world_group, 0, world_group, 0, "org.hmpi.test.bad",
                                                              MPI_INFO_NULL, MPI_ERRORS_RETURN, &inter));
        OK(MPI_Group_free(&even));
        OK(MPI_Group_free(&odd));
    }

    /* Bad arguments of the constructors. */
    MPI_Comm none = MPI_COMM_NULL;
    FAILS(MPI_ERR_ARG, MPI_Comm_create_from_group(world_group, NULL, MPI_INFO_NULL, MPI_ERRORS_RETURN, &none));
    FAILS(MPI_ERR_GROUP, MPI_Comm_create_from_group(MPI_GROUP_NULL, "t", MPI_INFO_NULL, MPI_ERRORS_RETURN, &none));
    FAILS(MPI_ERR_GROUP, MPI_Comm_create_from_group(MPI_GROUP_EMPTY, "t", MPI_INFO_NULL, MPI_ERRORS_RETURN, &none));
    CHECK(none == MPI_COMM_NULL);

    /* Session error handlers. */
    MPI_Errhandler seh;
    OK(MPI_Session_create_errhandler(on_session_error, &seh));
    OK(MPI_Session_set_errhandler(s, seh));
    MPI_Errhandler got_eh;
    OK(MPI_Session_get_errhandler(s, &got_eh));
    CHECK(got_eh == seh);
    OK(MPI_Session_call_errhandler(s, MPI_ERR_OTHER));
    CHECK(handled == MPI_ERR_OTHER && handled_session == s);
    handled = 0;
    MPI_Group bad_group;
    CHECK(MPI_Group_from_session_pset(s, "mpi://bogus", &bad_group) == MPI_ERR_ARG);
    CHECK(handled == MPI_ERR_ARG);
    OK(MPI_Session_set_errhandler(s, MPI_ERRORS_RETURN));
    const MPI_Errhandler stale = seh;
    OK(MPI_Errhandler_free(&seh));
    /* A communicator's handler is not a session's, nor is a freed one. */
    MPI_Errhandler ceh;
    OK(MPI_Comm_create_errhandler(on_comm_error, &ceh));
    FAILS(MPI_ERR_ARG, MPI_Session_set_errhandler(s, ceh));
    OK(MPI_Errhandler_free(&ceh));
    FAILS(MPI_ERR_ERRHANDLER, MPI_Session_set_errhandler(s, MPI_ERRHANDLER_NULL));
    FAILS(MPI_ERR_ERRHANDLER, MPI_Session_set_errhandler(s, stale));

    /* The session buffer serves the communicators of its groups. */
    const int cap = 1024 + MPI_BSEND_OVERHEAD;
    char *space = malloc((size_t)cap);
    CHECK(space != NULL);
    int msg = 40 + rank, in = -1;
    FAILS(MPI_ERR_BUFFER, MPI_Bsend(&msg, 1, MPI_INT, rank, 5, comm));
    OK(MPI_Session_attach_buffer(s, space, cap));
    FAILS(MPI_ERR_BUFFER, MPI_Session_attach_buffer(s, space, cap));
    OK(MPI_Bsend(&msg, 1, MPI_INT, rank, 5, comm));
    OK(MPI_Session_flush_buffer(s));
    OK(MPI_Recv(&in, 1, MPI_INT, rank, 5, comm, MPI_STATUS_IGNORE));
    CHECK(in == msg);
    OK(MPI_Bsend(&msg, 1, MPI_INT, rank, 6, comm));
    MPI_Request fr = MPI_REQUEST_NULL;
    OK(MPI_Session_iflush_buffer(s, &fr));
    OK(MPI_Wait(&fr, MPI_STATUS_IGNORE));
    CHECK(fr == MPI_REQUEST_NULL);
    OK(MPI_Recv(&in, 1, MPI_INT, rank, 6, comm, MPI_STATUS_IGNORE));
    void *back = NULL;
    int back_size = 0;
    OK(MPI_Session_detach_buffer(s, &back, &back_size));
    CHECK(back == space && back_size == cap);
    FAILS(MPI_ERR_BUFFER, MPI_Session_detach_buffer(s, &back, &back_size));
    MPI_Count big = 0;
    OK(MPI_Session_attach_buffer_c(s, space, (MPI_Count)cap));
    OK(MPI_Session_detach_buffer_c(s, &back, &big));
    CHECK(back == space && big == cap);
    free(space);

    if (with_init) {
        /* Both models together: the world is there, and a bad session
         * handle goes to MPI_COMM_SELF's handler. */
        int wsize = 0;
        OK(MPI_Comm_size(MPI_COMM_WORLD, &wsize));
        CHECK(wsize == size);
        FAILS(MPI_ERR_SESSION, MPI_Session_get_num_psets(MPI_SESSION_NULL, MPI_INFO_NULL, &n));
        FAILS(MPI_ERR_SESSION, MPI_Session_get_num_psets((MPI_Session)(intptr_t)0x4444, MPI_INFO_NULL, &n));
        OK(MPI_Barrier(MPI_COMM_WORLD));
        OK(MPI_Finalize());
        OK(MPI_Finalized(&flag));
        CHECK(flag);
        /* The session still holds the runtime. */
        use_comm(comm, size);
    }

    OK(MPI_Comm_free(&comm));
    OK(MPI_Group_free(&world_group));
    OK(MPI_Session_finalize(&s));
    CHECK(s == MPI_SESSION_NULL);
    if (!with_init) {
        OK(MPI_Initialized(&flag));
        CHECK(!flag);
        /* The runtime ended with the last session: it does not start again. */
        FAILS(MPI_ERR_OTHER, MPI_Session_init(MPI_INFO_NULL, MPI_ERRORS_RETURN, &s));
    }
    PASSED("sessions");
    return 0;
}
