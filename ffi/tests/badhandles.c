/* Every kind of handle, made up, null, freed or of another kind, is an
 * error of its own class under MPI_ERRORS_RETURN, never decoded as
 * something valid: windows (MPI_ERR_WIN), info objects (MPI_ERR_INFO),
 * communicators without the topology a routine needs (MPI_ERR_TOPOLOGY),
 * intercommunicators where an intracommunicator is needed and the reverse
 * (MPI_ERR_COMM), attribute keys (MPI_ERR_KEYVAL), error handlers
 * (MPI_ERR_ERRHANDLER), requests (MPI_ERR_REQUEST). Then the request
 * routines after MPI_Finalize: MPI_ERR_OTHER, as for the other routines
 * MPI does not allow then (MPI 4.1 §11.2). */
#include "check.h"
#include <stdint.h>

static void comm_handler(MPI_Comm *comm, int *code, ...) {
    (void)comm;
    (void)code;
}

static void win_handler(MPI_Win *win, int *code, ...) {
    (void)win;
    (void)code;
}

int main(int argc, char **argv) {
    int size, n, flag, x = 0, buf[8] = {0};
    MPI_Status st;
    OK(MPI_Init(&argc, &argv));
    OK(MPI_Comm_rank(MPI_COMM_WORLD, &check_rank));
    OK(MPI_Comm_size(MPI_COMM_WORLD, &size));
    CHECK(size == 2);
    OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    OK(MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN));

    /* Windows. */
    {
        MPI_Win w, stale;
        OK(MPI_Win_create(buf, sizeof buf, sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, &w));
        stale = w;
        OK(MPI_Win_free(&w));
        CHECK(w == MPI_WIN_NULL);
        MPI_Win bad[] = {MPI_WIN_NULL, (MPI_Win)0x4444, (MPI_Win)MPI_COMM_WORLD, (MPI_Win)MPI_INT,
                         (MPI_Win)0x7fffffff, stale};
        for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
            MPI_Win copy = bad[i];
            MPI_Group g;
            FAILS(MPI_ERR_WIN, MPI_Win_fence(0, bad[i]));
            FAILS(MPI_ERR_WIN, MPI_Put(&x, 1, MPI_INT, 0, 0, 1, MPI_INT, bad[i]));
            FAILS(MPI_ERR_WIN, MPI_Get(&x, 1, MPI_INT, 0, 0, 1, MPI_INT, bad[i]));
            FAILS(MPI_ERR_WIN, MPI_Accumulate(&x, 1, MPI_INT, 0, 0, 1, MPI_INT, MPI_SUM, bad[i]));
            FAILS(MPI_ERR_WIN, MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, bad[i]));
            FAILS(MPI_ERR_WIN, MPI_Win_unlock(0, bad[i]));
            FAILS(MPI_ERR_WIN, MPI_Win_get_group(bad[i], &g));
            FAILS(MPI_ERR_WIN, MPI_Win_set_errhandler(bad[i], MPI_ERRORS_RETURN));
            FAILS(MPI_ERR_WIN, MPI_Win_free(&copy));
        }
    }

    /* Info objects. */
    {
        MPI_Info info, stale;
        char value[16];
        OK(MPI_Info_create(&info));
        stale = info;
        OK(MPI_Info_free(&info));
        CHECK(info == MPI_INFO_NULL);
        MPI_Info bad[] = {(MPI_Info)0x4444, (MPI_Info)MPI_COMM_WORLD, (MPI_Info)0x7fffffff, stale};
        for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
            MPI_Info copy = bad[i], dup;
            FAILS(MPI_ERR_INFO, MPI_Info_set(bad[i], "key", "value"));
            FAILS(MPI_ERR_INFO, MPI_Info_get_nkeys(bad[i], &n));
            FAILS(MPI_ERR_INFO, MPI_Info_get_string(bad[i], "key", &n, value, &flag));
            FAILS(MPI_ERR_INFO, MPI_Info_dup(bad[i], &dup));
            FAILS(MPI_ERR_INFO, MPI_Info_free(&copy));
            FAILS(MPI_ERR_INFO, MPI_Comm_set_info(MPI_COMM_WORLD, bad[i]));
        }
        /* MPI_INFO_NULL is no object to change or free. */
        MPI_Info null = MPI_INFO_NULL;
        FAILS(MPI_ERR_INFO, MPI_Info_set(MPI_INFO_NULL, "key", "value"));
        FAILS(MPI_ERR_INFO, MPI_Info_free(&null));
    }

    /* Topologies: a routine for a topology a communicator does not have. */
    {
        int dims[1] = {2}, periods[1] = {0}, coords[1], src, dst, idx[2], edges[2], ngb[2];
        MPI_Comm cart, graph;
        OK(MPI_Cart_create(MPI_COMM_WORLD, 1, dims, periods, 0, &cart));
        idx[0] = 1;
        idx[1] = 2;
        edges[0] = 1;
        edges[1] = 0;
        OK(MPI_Graph_create(MPI_COMM_WORLD, 2, idx, edges, 0, &graph));
        FAILS(MPI_ERR_TOPOLOGY, MPI_Cart_coords(MPI_COMM_WORLD, 0, 1, coords));
        FAILS(MPI_ERR_TOPOLOGY, MPI_Cart_shift(MPI_COMM_WORLD, 0, 1, &src, &dst));
        FAILS(MPI_ERR_TOPOLOGY, MPI_Cartdim_get(graph, &n));
        FAILS(MPI_ERR_TOPOLOGY, MPI_Graph_neighbors_count(cart, 0, &n));
        FAILS(MPI_ERR_TOPOLOGY, MPI_Graph_neighbors(MPI_COMM_WORLD, 0, 2, ngb));
        FAILS(MPI_ERR_TOPOLOGY, MPI_Graphdims_get(cart, &n, &flag));
        FAILS(MPI_ERR_TOPOLOGY, MPI_Dist_graph_neighbors_count(MPI_COMM_WORLD, &n, &src, &flag));
        FAILS(MPI_ERR_TOPOLOGY, MPI_Neighbor_allgather(&x, 1, MPI_INT, buf, 1, MPI_INT, MPI_COMM_WORLD));
        /* Bad communicators stay MPI_ERR_COMM. */
        FAILS(MPI_ERR_COMM, MPI_Cartdim_get(MPI_COMM_NULL, &n));
        FAILS(MPI_ERR_COMM, MPI_Topo_test((MPI_Comm)0x4444, &n));
        OK(MPI_Comm_free(&cart));
        OK(MPI_Comm_free(&graph));
    }

    /* Intercommunicators where an intracommunicator is needed, and the
     * reverse. */
    {
        MPI_Comm self_half, inter, merged;
        OK(MPI_Comm_split(MPI_COMM_WORLD, check_rank, 0, &self_half));
        OK(MPI_Intercomm_create(self_half, 0, MPI_COMM_WORLD, 1 - check_rank, 7, &inter));
        int dims[1] = {1}, periods[1] = {0};
        MPI_Comm cart;
        FAILS(MPI_ERR_COMM, MPI_Cart_create(inter, 1, dims, periods, 0, &cart));
        FAILS(MPI_ERR_COMM, MPI_Intercomm_merge(MPI_COMM_WORLD, 0, &merged));
        FAILS(MPI_ERR_COMM, MPI_Comm_remote_size(MPI_COMM_WORLD, &n));
        FAILS(MPI_ERR_COMM, MPI_Intercomm_merge((MPI_Comm)0x4444, 0, &merged));
        FAILS(MPI_ERR_COMM, MPI_Intercomm_create(self_half, 0, (MPI_Comm)0x4444, 1 - check_rank, 7, &merged));
        OK(MPI_Comm_remote_size(inter, &n));
        CHECK(n == 1);
        OK(MPI_Comm_free(&inter));
        OK(MPI_Comm_free(&self_half));
    }

    /* Attribute keys. */
    {
        int key, stale_key;
        void *val;
        OK(MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, MPI_COMM_NULL_DELETE_FN, &key, NULL));
        stale_key = key;
        OK(MPI_Comm_free_keyval(&key));
        CHECK(key == MPI_KEYVAL_INVALID);
        int type_key, win_key;
        OK(MPI_Type_create_keyval(MPI_TYPE_NULL_COPY_FN, MPI_TYPE_NULL_DELETE_FN, &type_key, NULL));
        OK(MPI_Win_create_keyval(MPI_WIN_NULL_COPY_FN, MPI_WIN_NULL_DELETE_FN, &win_key, NULL));
        int bad[] = {MPI_KEYVAL_INVALID, 0x4444, -5, 0x7fffffff, stale_key, type_key, win_key};
        for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
            int copy = bad[i];
            FAILS(MPI_ERR_KEYVAL, MPI_Comm_set_attr(MPI_COMM_WORLD, bad[i], &x));
            FAILS(MPI_ERR_KEYVAL, MPI_Comm_get_attr(MPI_COMM_WORLD, bad[i], &val, &flag));
            FAILS(MPI_ERR_KEYVAL, MPI_Comm_delete_attr(MPI_COMM_WORLD, bad[i]));
            if (bad[i] != type_key && bad[i] != win_key) {
                FAILS(MPI_ERR_KEYVAL, MPI_Comm_free_keyval(&copy));
            }
        }
        OK(MPI_Type_free_keyval(&type_key));
        OK(MPI_Win_free_keyval(&win_key));
        /* A predefined key cannot be set, deleted or freed. */
        int tag_ub = MPI_TAG_UB;
        FAILS(MPI_ERR_KEYVAL, MPI_Comm_set_attr(MPI_COMM_WORLD, MPI_TAG_UB, &x));
        FAILS(MPI_ERR_KEYVAL, MPI_Comm_free_keyval(&tag_ub));
    }

    /* Error handlers. */
    {
        MPI_Errhandler eh, stale, got, weh;
        OK(MPI_Comm_create_errhandler(comm_handler, &eh));
        stale = eh;
        OK(MPI_Errhandler_free(&eh));
        MPI_Errhandler bad[] = {MPI_ERRHANDLER_NULL, (MPI_Errhandler)0x4444, (MPI_Errhandler)MPI_COMM_WORLD,
                                (MPI_Errhandler)0x7fffffff, stale};
        for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
            MPI_Errhandler copy = bad[i];
            FAILS(MPI_ERR_ERRHANDLER, MPI_Comm_set_errhandler(MPI_COMM_WORLD, bad[i]));
            FAILS(MPI_ERR_ERRHANDLER, MPI_Errhandler_free(&copy));
        }
        OK(MPI_Comm_get_errhandler(MPI_COMM_WORLD, &got));
        CHECK(got == MPI_ERRORS_RETURN);
        /* A window's handler is not for communicators (an argument of the
         * wrong kind, not a bad handle). */
        OK(MPI_Win_create_errhandler(win_handler, &weh));
        FAILS(MPI_ERR_ARG, MPI_Comm_set_errhandler(MPI_COMM_WORLD, weh));
        OK(MPI_Errhandler_free(&weh));
    }

    /* Requests. */
    {
        MPI_Request bad[] = {(MPI_Request)0x4444, (MPI_Request)MPI_COMM_WORLD, (MPI_Request)(intptr_t)-1};
        for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
            MPI_Request copy = bad[i];
            FAILS(MPI_ERR_REQUEST, MPI_Wait(&copy, &st));
            FAILS(MPI_ERR_REQUEST, MPI_Start(&copy));
            FAILS(MPI_ERR_REQUEST, MPI_Request_get_status(bad[i], &flag, &st));
        }
    }

    OK(MPI_Barrier(MPI_COMM_WORLD));
    MPI_Request r, pending;
    OK(MPI_Irecv(&x, 1, MPI_INT, 0, 9, MPI_COMM_SELF, &pending));
    OK(MPI_Cancel(&pending));
    OK(MPI_Wait(&pending, &st));
    OK(MPI_Send_init(&x, 1, MPI_INT, 0, 9, MPI_COMM_SELF, &r));
    OK(MPI_Finalize());
    /* After MPI_Finalize: the request routines are errors too, even on
     * MPI_REQUEST_NULL (nothing to do, but not a routine MPI allows
     * then), and on a request made before. */
    MPI_Request null = MPI_REQUEST_NULL, two[2] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL};
    FAILS(MPI_ERR_OTHER, MPI_Wait(&null, &st));
    FAILS(MPI_ERR_OTHER, MPI_Test(&null, &flag, &st));
    FAILS(MPI_ERR_OTHER, MPI_Waitall(2, two, MPI_STATUSES_IGNORE));
    FAILS(MPI_ERR_OTHER, MPI_Testany(2, two, &n, &flag, &st));
    FAILS(MPI_ERR_OTHER, MPI_Request_get_status(null, &flag, &st));
    FAILS(MPI_ERR_OTHER, MPI_Start(&r));
    FAILS(MPI_ERR_OTHER, MPI_Cancel(&r));
    FAILS(MPI_ERR_OTHER, MPI_Request_free(&r));
    PASSED("badhandles");
    return 0;
}
