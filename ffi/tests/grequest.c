/* Generalized requests (completed from another thread and from the
 * program itself, alone and mixed with point-to-point requests in the
 * array completions, with their query results in the statuses), the
 * request-status routines of MPI 5.0, the buffer flushes as requests, and
 * error classes, codes and strings the program adds. */
#include "check.h"

#include <pthread.h>
#include <string.h>

/* What a generalized request works on, and what its callbacks saw. */
struct job {
    MPI_Request req;
    int n;          /* elements "received", set before completing */
    int fail;       /* what query_fn returns */
    int queried;
    int freed;
    int cancelled;  /* 1: cancelled before completion, 2: after */
};

static int query(void *state, MPI_Status *st) {
    struct job *j = state;
    j->queried++;
    MPI_Status_set_elements(st, MPI_INT, j->n);
    MPI_Status_set_cancelled(st, 0);
    st->MPI_SOURCE = 1234;
    st->MPI_TAG = 99;
    return j->fail;
}

static int release(void *state) {
    ((struct job *)state)->freed++;
    return MPI_SUCCESS;
}

static int cancel(void *state, int complete) {
    ((struct job *)state)->cancelled = complete ? 2 : 1;
    return MPI_SUCCESS;
}

static void start(struct job *j) {
    memset(j, 0, sizeof *j);
    OK(MPI_Grequest_start(query, release, cancel, j, &j->req));
    CHECK(j->req != MPI_REQUEST_NULL);
}

/* Another thread finishes the work, then completes the request. */
static void *worker(void *arg) {
    struct job *j = arg;
    for (volatile int spin = 0; spin < 100000; spin++) {
    }
    j->n = 17;
    CHECK(MPI_Grequest_complete(j->req) == MPI_SUCCESS);
    return NULL;
}

static void check_query_status(const MPI_Status *st, int n) {
    int count = -1;
    OK(MPI_Get_count(st, MPI_INT, &count));
    CHECK(count == n);
    CHECK(st->MPI_SOURCE == 1234 && st->MPI_TAG == 99);
}

static int comm_handled;
static void on_comm_error(MPI_Comm *c, int *code, ...) {
    (void)c;
    comm_handled = *code;
}

static void generalized_requests(int rank) {
    struct job a, b;
    MPI_Status st;
    pthread_t t;
    int flag = -1, index = -1;

    /* Completed by another thread, waited for. */
    start(&a);
    CHECK(pthread_create(&t, NULL, worker, &a) == 0);
    OK(MPI_Wait(&a.req, &st));
    CHECK(pthread_join(t, NULL) == 0);
    CHECK(a.req == MPI_REQUEST_NULL);
    check_query_status(&st, 17);
    CHECK(a.queried == 1 && a.freed == 1);

    /* Completed by the program itself: tested, its status peeked at. */
    start(&a);
    OK(MPI_Test(&a.req, &flag, &st));
    CHECK(!flag && a.req != MPI_REQUEST_NULL);
    OK(MPI_Request_get_status(a.req, &flag, &st));
    CHECK(!flag && a.queried == 0);
    a.n = 3;
    OK(MPI_Grequest_complete(a.req));
    FAILS(MPI_ERR_REQUEST, MPI_Grequest_complete(a.req));
    OK(MPI_Request_get_status(a.req, &flag, &st));
    CHECK(flag && a.queried == 1 && a.freed == 0);
    check_query_status(&st, 3);
    OK(MPI_Test(&a.req, &flag, &st));
    CHECK(flag && a.req == MPI_REQUEST_NULL && a.queried == 2 && a.freed == 1);
    check_query_status(&st, 3);

    /* In Waitall with point-to-point requests (to itself). */
    int out = 100 + rank, in = -1;
    MPI_Request reqs[3];
    MPI_Status sts[3];
    start(&a);
    OK(MPI_Irecv(&in, 1, MPI_INT, rank, 4, MPI_COMM_WORLD, &reqs[0]));
    OK(MPI_Isend(&out, 1, MPI_INT, rank, 4, MPI_COMM_WORLD, &reqs[1]));
    reqs[2] = a.req;
    CHECK(pthread_create(&t, NULL, worker, &a) == 0);
    OK(MPI_Waitall(3, reqs, sts));
    CHECK(pthread_join(t, NULL) == 0);
    CHECK(in == out && sts[0].MPI_SOURCE == rank && sts[0].MPI_TAG == 4);
    check_query_status(&sts[2], 17);
    for (int i = 0; i < 3; i++) {
        CHECK(reqs[i] == MPI_REQUEST_NULL);
    }
    CHECK(a.freed == 1);

    /* Waitany: the receive finishes first, then the request. */
    start(&a);
    OK(MPI_Isend(&out, 1, MPI_INT, rank, 5, MPI_COMM_WORLD, &reqs[2]));
    OK(MPI_Wait(&reqs[2], MPI_STATUS_IGNORE));
    reqs[0] = a.req;
    OK(MPI_Irecv(&in, 1, MPI_INT, rank, 5, MPI_COMM_WORLD, &reqs[1]));
    OK(MPI_Waitany(2, reqs, &index, &st));
    CHECK(index == 1 && st.MPI_TAG == 5 && reqs[0] == a.req);
    a.n = 8;
    OK(MPI_Grequest_complete(a.req));
    OK(MPI_Waitany(2, reqs, &index, &st));
    CHECK(index == 0 && reqs[0] == MPI_REQUEST_NULL);
    check_query_status(&st, 8);
    OK(MPI_Waitany(2, reqs, &index, &st));
    CHECK(index == MPI_UNDEFINED);

    /* Testsome and Waitsome over two of them. */
    int indices[2], outcount = -1;
    start(&a);
    start(&b);
    reqs[0] = a.req;
    reqs[1] = b.req;
    OK(MPI_Testsome(2, reqs, &outcount, indices, sts));
    CHECK(outcount == 0);
    b.n = 2;
    OK(MPI_Grequest_complete(b.req));
    OK(MPI_Testsome(2, reqs, &outcount, indices, sts));
    CHECK(outcount == 1 && indices[0] == 1 && reqs[1] == MPI_REQUEST_NULL);
    check_query_status(&sts[0], 2);
    CHECK(pthread_create(&t, NULL, worker, &a) == 0);
    OK(MPI_Waitsome(2, reqs, &outcount, indices, sts));
    CHECK(pthread_join(t, NULL) == 0);
    CHECK(outcount == 1 && indices[0] == 0 && reqs[0] == MPI_REQUEST_NULL);
    check_query_status(&sts[0], 17);
    CHECK(a.freed == 1 && b.freed == 1);

    /* A failing query: its code is the error, and the request is freed. */
    start(&a);
    a.fail = MPI_ERR_OTHER;
    OK(MPI_Grequest_complete(a.req));
    FAILS(MPI_ERR_OTHER, MPI_Wait(&a.req, &st));
    CHECK(a.req == MPI_REQUEST_NULL && a.freed == 1 && st.MPI_ERROR == MPI_ERR_OTHER);

    /* Cancel before and after completion. */
    start(&a);
    OK(MPI_Cancel(&a.req));
    CHECK(a.cancelled == 1);
    OK(MPI_Grequest_complete(a.req));
    OK(MPI_Cancel(&a.req));
    CHECK(a.cancelled == 2);
    OK(MPI_Wait(&a.req, MPI_STATUS_IGNORE));

    /* Freed before it completes: free_fn runs when it completes. */
    start(&a);
    MPI_Request keep = a.req;
    OK(MPI_Request_free(&a.req));
    CHECK(a.req == MPI_REQUEST_NULL && a.freed == 0);
    OK(MPI_Grequest_complete(keep));
    CHECK(a.freed == 1 && a.queried == 0);
    /* Freed after: at once. */
    start(&a);
    OK(MPI_Grequest_complete(a.req));
    OK(MPI_Request_free(&a.req));
    CHECK(a.freed == 1 && a.queried == 0);

    /* Not a generalized request. */
    FAILS(MPI_ERR_REQUEST, MPI_Grequest_complete(MPI_REQUEST_NULL));
    FAILS(MPI_ERR_ARG, MPI_Grequest_start(query, release, cancel, &a, NULL));
}

static void request_statuses(int rank) {
    struct job a;
    MPI_Request reqs[3];
    MPI_Status sts[3], st;
    int flag = -1, index = -1, outcount = -1, indices[3];
    int in = -1, out = 7 + rank;

    start(&a);
    reqs[0] = a.req;
    reqs[1] = MPI_REQUEST_NULL;
    OK(MPI_Irecv(&in, 1, MPI_INT, rank, 6, MPI_COMM_WORLD, &reqs[2]));
    OK(MPI_Request_get_status_all(3, reqs, &flag, sts));
    CHECK(!flag);
    OK(MPI_Request_get_status_any(3, reqs, &index, &flag, &st));
    CHECK(!flag && index == MPI_UNDEFINED);
    OK(MPI_Request_get_status_some(3, reqs, &outcount, indices, sts));
    CHECK(outcount == 0);

    /* The receive finishes: "any" and "some" see it, "all" does not. */
    OK(MPI_Send(&out, 1, MPI_INT, rank, 6, MPI_COMM_WORLD));
    do {
        OK(MPI_Request_get_status_any(3, reqs, &index, &flag, &st));
    } while (!flag);
    CHECK(index == 2 && st.MPI_TAG == 6 && reqs[2] != MPI_REQUEST_NULL);
    OK(MPI_Request_get_status_some(3, reqs, &outcount, indices, sts));
    CHECK(outcount == 1 && indices[0] == 2 && sts[0].MPI_SOURCE == rank);
    OK(MPI_Request_get_status_all(3, reqs, &flag, sts));
    CHECK(!flag);

    /* Every one finished: statuses, nothing freed. */
    a.n = 5;
    OK(MPI_Grequest_complete(a.req));
    OK(MPI_Request_get_status_all(3, reqs, &flag, sts));
    CHECK(flag);
    check_query_status(&sts[0], 5);
    CHECK(sts[1].MPI_SOURCE == MPI_ANY_SOURCE && sts[1].MPI_TAG == MPI_ANY_TAG);
    CHECK(sts[2].MPI_TAG == 6);
    CHECK(reqs[0] == a.req && reqs[2] != MPI_REQUEST_NULL && a.freed == 0);
    OK(MPI_Request_get_status_some(3, reqs, &outcount, indices, MPI_STATUSES_IGNORE));
    CHECK(outcount == 2 && indices[0] == 0 && indices[1] == 2);
    OK(MPI_Request_get_status_all(3, reqs, &flag, MPI_STATUSES_IGNORE));
    CHECK(flag);
    OK(MPI_Waitall(3, reqs, MPI_STATUSES_IGNORE));
    CHECK(in == out && a.freed == 1);

    /* Only null requests. */
    OK(MPI_Request_get_status_any(3, reqs, &index, &flag, &st));
    CHECK(flag && index == MPI_UNDEFINED);
    OK(MPI_Request_get_status_some(3, reqs, &outcount, indices, sts));
    CHECK(outcount == MPI_UNDEFINED);
    OK(MPI_Request_get_status_all(0, NULL, &flag, MPI_STATUSES_IGNORE));
    CHECK(flag);
    FAILS(MPI_ERR_COUNT, MPI_Request_get_status_all(-1, reqs, &flag, sts));
    FAILS(MPI_ERR_ARG, MPI_Request_get_status_any(3, reqs, NULL, &flag, &st));
}

static void flushes_as_requests(int rank) {
    const int cap = 256 + MPI_BSEND_OVERHEAD;
    char *space = malloc((size_t)cap);
    CHECK(space != NULL);
    int out = 3 + rank, in = -1;
    MPI_Request r;
    OK(MPI_Buffer_attach(space, cap));
    OK(MPI_Bsend(&out, 1, MPI_INT, rank, 8, MPI_COMM_WORLD));
    OK(MPI_Buffer_iflush(&r));
    OK(MPI_Wait(&r, MPI_STATUS_IGNORE));
    CHECK(r == MPI_REQUEST_NULL);
    OK(MPI_Recv(&in, 1, MPI_INT, rank, 8, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
    CHECK(in == out);
    void *back;
    int size;
    OK(MPI_Buffer_detach(&back, &size));

    MPI_Comm dup;
    OK(MPI_Comm_dup(MPI_COMM_WORLD, &dup));
    OK(MPI_Comm_attach_buffer(dup, space, cap));
    OK(MPI_Bsend(&out, 1, MPI_INT, rank, 9, dup));
    OK(MPI_Comm_iflush_buffer(dup, &r));
    int flag = 0;
    OK(MPI_Test(&r, &flag, MPI_STATUS_IGNORE));
    CHECK(flag);
    OK(MPI_Recv(&in, 1, MPI_INT, rank, 9, dup, MPI_STATUS_IGNORE));
    OK(MPI_Comm_detach_buffer(dup, &back, &size));
    CHECK(back == space && size == cap);
    FAILS(MPI_ERR_COMM, MPI_Comm_iflush_buffer(MPI_COMM_NULL, &r));
    FAILS(MPI_ERR_ARG, MPI_Buffer_iflush(NULL));
    OK(MPI_Comm_free(&dup));
    free(space);
}

static void error_classes(void) {
    int cls = -1, code = -1, arg_code = -1, got = -1, len = -1, flag = 0;
    char text[MPI_MAX_ERROR_STRING];
    int *last = NULL;

    OK(MPI_Add_error_class(&cls));
    CHECK(cls > MPI_ERR_LASTCODE);
    OK(MPI_Add_error_code(cls, &code));
    CHECK(code > cls);
    OK(MPI_Add_error_code(MPI_ERR_ARG, &arg_code));
    CHECK(arg_code > code);
    OK(MPI_Error_class(cls, &got));
    CHECK(got == cls);
    OK(MPI_Error_class(code, &got));
    CHECK(got == cls);
    OK(MPI_Error_class(arg_code, &got));
    CHECK(got == MPI_ERR_ARG);
    OK(MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_LASTUSEDCODE, &last, &flag));
    CHECK(flag && *last == arg_code);

    /* Strings: empty until set. */
    OK(MPI_Error_string(code, text, &len));
    CHECK(len == 0 && text[0] == 0);
    OK(MPI_Add_error_string(code, "the solver diverged"));
    OK(MPI_Add_error_string(cls, "solver errors"));
    OK(MPI_Error_string(code, text, &len));
    CHECK(strcmp(text, "the solver diverged") == 0 && len == (int)strlen(text));
    OK(MPI_Error_string(cls, text, &len));
    CHECK(strcmp(text, "solver errors") == 0);
    OK(MPI_Add_error_string(code, "replaced"));
    OK(MPI_Error_string(code, text, &len));
    CHECK(strcmp(text, "replaced") == 0);

    /* The program's code through an error handler. */
    MPI_Errhandler eh;
    OK(MPI_Comm_create_errhandler(on_comm_error, &eh));
    OK(MPI_Comm_set_errhandler(MPI_COMM_SELF, eh));
    OK(MPI_Comm_call_errhandler(MPI_COMM_SELF, code));
    CHECK(comm_handled == code);
    OK(MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN));
    OK(MPI_Errhandler_free(&eh));

    /* Bad arguments. */
    char long_text[MPI_MAX_ERROR_STRING + 8];
    memset(long_text, 'x', sizeof long_text - 1);
    long_text[sizeof long_text - 1] = 0;
    FAILS(MPI_ERR_ARG, MPI_Add_error_string(code, long_text));
    FAILS(MPI_ERR_ARG, MPI_Add_error_string(code, NULL));
    FAILS(MPI_ERR_ARG, MPI_Add_error_string(MPI_ERR_TAG, "mine"));
    FAILS(MPI_ERR_ARG, MPI_Add_error_string(cls + 1000, "nobody's"));
    FAILS(MPI_ERR_ARG, MPI_Add_error_code(code, &got)); /* a code, not a class */
    FAILS(MPI_ERR_ARG, MPI_Add_error_code(MPI_SUCCESS, &got));
    FAILS(MPI_ERR_ARG, MPI_Add_error_code(-3, &got));
    FAILS(MPI_ERR_ARG, MPI_Add_error_class(NULL));
    FAILS(MPI_ERR_ARG, MPI_Remove_error_class(cls)); /* it still has a code */
    FAILS(MPI_ERR_ARG, MPI_Remove_error_class(MPI_ERR_ARG));
    FAILS(MPI_ERR_ARG, MPI_Remove_error_code(cls));
    FAILS(MPI_ERR_ARG, MPI_Remove_error_code(MPI_ERR_TAG));

    /* Removal, in order. */
    OK(MPI_Remove_error_string(code));
    FAILS(MPI_ERR_ARG, MPI_Remove_error_string(code));
    OK(MPI_Error_string(code, text, &len));
    CHECK(len == 0);
    OK(MPI_Remove_error_code(code));
    FAILS(MPI_ERR_ARG, MPI_Error_class(code, &got));
    FAILS(MPI_ERR_ARG, MPI_Error_string(code, text, &len));
    OK(MPI_Remove_error_class(cls));
    FAILS(MPI_ERR_ARG, MPI_Error_class(cls, &got));
    OK(MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_LASTUSEDCODE, &last, &flag));
    CHECK(*last == arg_code);
    OK(MPI_Remove_error_code(arg_code));
    CHECK(*last == MPI_ERR_LASTCODE);
    /* Numbers are not reused. */
    int again = -1;
    OK(MPI_Add_error_class(&again));
    CHECK(again > arg_code && *last == again);
    OK(MPI_Remove_error_class(again));
}

int main(int argc, char **argv) {
    int provided = 0;
    OK(MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided));
    CHECK(provided == MPI_THREAD_MULTIPLE);
    int rank = -1;
    OK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    check_rank = rank;
    OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    OK(MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN));
    generalized_requests(rank);
    request_statuses(rank);
    flushes_as_requests(rank);
    error_classes();
    OK(MPI_Barrier(MPI_COMM_WORLD));
    OK(MPI_Finalize());
    PASSED("grequest");
    return 0;
}
