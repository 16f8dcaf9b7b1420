/* Attributes: the predefined communicator attributes, user keys with copy
 * and delete callbacks on communicators and datatypes (called the right
 * number of times with the right arguments), the predefined callbacks,
 * the deprecated forms, failing callbacks, and the deletion of
 * MPI_COMM_SELF's attributes before MPI_COMM_WORLD's at MPI_Finalize. */
#include "check.h"
#include <string.h>

static int copies, deletes, type_copies, type_deletes;
static MPI_Comm last_comm;
static void *last_value;
static int extra_token;
static char order[8];
static int norder;

static int copy_fn(MPI_Comm comm, int keyval, void *extra, void *in, void *out, int *flag) {
    (void)keyval;
    CHECK(extra == &extra_token);
    copies++;
    last_comm = comm;
    *(void **)out = (char *)in + 1;
    *flag = 1;
    return MPI_SUCCESS;
}

static int delete_fn(MPI_Comm comm, int keyval, void *value, void *extra) {
    (void)keyval;
    CHECK(extra == &extra_token);
    deletes++;
    last_comm = comm;
    last_value = value;
    return MPI_SUCCESS;
}

static int no_copy_fn(MPI_Comm comm, int keyval, void *extra, void *in, void *out, int *flag) {
    (void)comm, (void)keyval, (void)extra, (void)in, (void)out;
    *flag = 0;
    return MPI_SUCCESS;
}

static int failing_copy_fn(MPI_Comm comm, int keyval, void *extra, void *in, void *out, int *flag) {
    (void)comm, (void)keyval, (void)extra, (void)in, (void)out, (void)flag;
    return MPI_ERR_OTHER;
}

static int failing_delete_fn(MPI_Comm comm, int keyval, void *value, void *extra) {
    (void)comm, (void)keyval, (void)extra;
    return *(int *)value ? MPI_ERR_OTHER : MPI_SUCCESS;
}

static int type_copy_fn(MPI_Datatype t, int keyval, void *extra, void *in, void *out, int *flag) {
    (void)t, (void)keyval, (void)extra;
    type_copies++;
    *(void **)out = in;
    *flag = 1;
    return MPI_SUCCESS;
}

static int type_delete_fn(MPI_Datatype t, int keyval, void *value, void *extra) {
    (void)t, (void)keyval, (void)value, (void)extra;
    type_deletes++;
    return MPI_SUCCESS;
}

static int win_deletes;
static MPI_Win last_win;

static int win_delete_fn(MPI_Win w, int keyval, void *value, void *extra) {
    (void)keyval, (void)value;
    CHECK(extra == &extra_token);
    win_deletes++;
    last_win = w;
    return MPI_SUCCESS;
}

static int finalize_delete_fn(MPI_Comm comm, int keyval, void *value, void *extra) {
    (void)keyval, (void)extra, (void)value;
    int finalized = 1;
    MPI_Finalized(&finalized);
    CHECK(!finalized);
    if (norder < 7)
        order[norder++] = comm == MPI_COMM_SELF ? 'S' : comm == MPI_COMM_WORLD ? 'W' : '?';
    return MPI_SUCCESS;
}

int main(int argc, char **argv) {
    int rank, size, flag;
    OK(MPI_Init(&argc, &argv));
    OK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    OK(MPI_Comm_size(MPI_COMM_WORLD, &size));
    check_rank = rank;

    /* Predefined attributes: pointers to ints. */
    int *v = NULL;
    OK(MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &v, &flag));
    CHECK(flag && *v >= 32767);
    int tag_ub = *v;
    OK(MPI_Send(&rank, 1, MPI_INT, rank, tag_ub, MPI_COMM_WORLD));
    OK(MPI_Recv(&flag, 1, MPI_INT, rank, tag_ub, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
    OK(MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_UNIVERSE_SIZE, &v, &flag));
    CHECK(flag && *v == size);
    OK(MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_WTIME_IS_GLOBAL, &v, &flag));
    CHECK(flag && (*v == 0 || *v == 1));
    OK(MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_HOST, &v, &flag));
    CHECK(flag && (*v == MPI_PROC_NULL || (*v >= 0 && *v < size)));
    OK(MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_IO, &v, &flag));
    CHECK(flag && (*v == MPI_ANY_SOURCE || *v == MPI_PROC_NULL || (*v >= 0 && *v < size)));
    OK(MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_APPNUM, &v, &flag));
    CHECK(flag && *v == 0);
    OK(MPI_Comm_get_attr(MPI_COMM_SELF, MPI_LASTUSEDCODE, &v, &flag));
    CHECK(flag && *v >= MPI_ERR_LASTCODE);
    OK(MPI_Attr_get(MPI_COMM_WORLD, MPI_TAG_UB, &v, &flag));
    CHECK(flag && *v == tag_ub);

    /* A key with callbacks: set, replace, dup, delete, free. */
    int key = MPI_KEYVAL_INVALID;
    OK(MPI_Comm_create_keyval(copy_fn, delete_fn, &key, &extra_token));
    CHECK(key != MPI_KEYVAL_INVALID);
    char data[16];
    void *got = NULL;
    OK(MPI_Comm_get_attr(MPI_COMM_WORLD, key, &got, &flag));
    CHECK(!flag);
    MPI_Comm comm;
    OK(MPI_Comm_dup(MPI_COMM_WORLD, &comm));
    OK(MPI_Comm_set_attr(comm, key, &data[0]));
    CHECK(deletes == 0);
    OK(MPI_Comm_set_attr(comm, key, &data[1]));
    CHECK(deletes == 1 && last_value == &data[0] && last_comm == comm);
    OK(MPI_Comm_get_attr(comm, key, &got, &flag));
    CHECK(flag && got == &data[1]);
    MPI_Comm dup;
    OK(MPI_Comm_dup(comm, &dup));
    CHECK(copies == 1 && last_comm == comm);
    OK(MPI_Comm_get_attr(dup, key, &got, &flag));
    CHECK(flag && got == &data[2]);
    OK(MPI_Comm_free(&dup));
    CHECK(deletes == 2 && last_value == &data[2]);
    OK(MPI_Comm_delete_attr(comm, key));
    CHECK(deletes == 3 && last_value == &data[1]);
    OK(MPI_Comm_get_attr(comm, key, &got, &flag));
    CHECK(!flag);
    /* A freed key: unusable, but its values keep their callbacks. */
    OK(MPI_Comm_set_attr(comm, key, &data[5]));
    OK(MPI_Comm_free_keyval(&key));
    CHECK(key == MPI_KEYVAL_INVALID);
    OK(MPI_Comm_dup(comm, &dup));
    CHECK(copies == 2);
    OK(MPI_Comm_free(&dup));
    CHECK(deletes == 4 && last_value == &data[6]);
    OK(MPI_Comm_free(&comm));
    CHECK(deletes == 5 && last_value == &data[5]);

    /* The predefined callbacks, a copy that declines, the deprecated forms. */
    int kdup, knull, kno, kold;
    OK(MPI_Comm_create_keyval(MPI_COMM_DUP_FN, MPI_COMM_NULL_DELETE_FN, &kdup, NULL));
    OK(MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, MPI_COMM_NULL_DELETE_FN, &knull, NULL));
    OK(MPI_Comm_create_keyval(no_copy_fn, MPI_COMM_NULL_DELETE_FN, &kno, NULL));
    OK(MPI_Keyval_create(MPI_DUP_FN, MPI_NULL_DELETE_FN, &kold, NULL));
    OK(MPI_Comm_dup(MPI_COMM_WORLD, &comm));
    OK(MPI_Comm_set_attr(comm, kdup, &data[3]));
    OK(MPI_Comm_set_attr(comm, knull, &data[4]));
    OK(MPI_Comm_set_attr(comm, kno, &data[4]));
    OK(MPI_Attr_put(comm, kold, &data[7]));
    OK(MPI_Comm_dup(comm, &dup));
    OK(MPI_Comm_get_attr(dup, kdup, &got, &flag));
    CHECK(flag && got == &data[3]);
    OK(MPI_Comm_get_attr(dup, knull, &got, &flag));
    CHECK(!flag);
    OK(MPI_Comm_get_attr(dup, kno, &got, &flag));
    CHECK(!flag);
    OK(MPI_Attr_get(dup, kold, &got, &flag));
    CHECK(flag && got == &data[7]);
    OK(MPI_Attr_delete(dup, kold));
    OK(MPI_Attr_get(dup, kold, &got, &flag));
    CHECK(!flag);
    OK(MPI_Comm_free(&dup));
    OK(MPI_Comm_free(&comm));
    OK(MPI_Keyval_free(&kold));
    CHECK(kold == MPI_KEYVAL_INVALID);
    OK(MPI_Comm_free_keyval(&kdup));
    OK(MPI_Comm_free_keyval(&knull));
    OK(MPI_Comm_free_keyval(&kno));
    CHECK(copies == 2 && deletes == 5);

    /* Datatype attributes: copied by MPI_Type_dup, deleted by MPI_Type_free. */
    int tkey;
    MPI_Datatype t, t2;
    OK(MPI_Type_create_keyval(type_copy_fn, type_delete_fn, &tkey, NULL));
    OK(MPI_Type_contiguous(3, MPI_INT, &t));
    OK(MPI_Type_set_attr(t, tkey, &data[8]));
    OK(MPI_Type_dup(t, &t2));
    CHECK(type_copies == 1);
    OK(MPI_Type_get_attr(t2, tkey, &got, &flag));
    CHECK(flag && got == &data[8]);
    OK(MPI_Type_free(&t));
    CHECK(type_deletes == 1);
    OK(MPI_Type_delete_attr(t2, tkey));
    CHECK(type_deletes == 2);
    OK(MPI_Type_get_attr(t2, tkey, &got, &flag));
    CHECK(!flag);
    OK(MPI_Type_set_attr(MPI_INT, tkey, &data[9]));
    OK(MPI_Type_get_attr(MPI_INT, tkey, &got, &flag));
    CHECK(flag && got == &data[9]);
    OK(MPI_Type_delete_attr(MPI_INT, tkey));
    CHECK(type_deletes == 3);
    OK(MPI_Type_free(&t2));
    CHECK(type_deletes == 3);
    OK(MPI_Type_free_keyval(&tkey));

    /* Window attributes: user keys beside the predefined ones; deleted
     * by MPI_Win_free. */
    {
        int wkey;
        MPI_Win win;
        void *base = NULL;
        OK(MPI_Win_create_keyval(MPI_WIN_NULL_COPY_FN, win_delete_fn, &wkey, &extra_token));
        OK(MPI_Win_allocate(64, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &base, &win));
        OK(MPI_Win_get_attr(win, wkey, &got, &flag));
        CHECK(!flag);
        OK(MPI_Win_set_attr(win, wkey, &data[10]));
        OK(MPI_Win_get_attr(win, wkey, &got, &flag));
        CHECK(flag && got == &data[10]);
        void *wbase = NULL;
        OK(MPI_Win_get_attr(win, MPI_WIN_BASE, &wbase, &flag));
        CHECK(flag && wbase == base);
        OK(MPI_Win_delete_attr(win, wkey));
        CHECK(win_deletes == 1 && last_win == win);
        OK(MPI_Win_set_attr(win, wkey, &data[11]));
        MPI_Win freed_win = win;
        OK(MPI_Win_free(&win));
        CHECK(win_deletes == 2 && last_win == freed_win);
        OK(MPI_Win_free_keyval(&wkey));
        CHECK(wkey == MPI_KEYVAL_INVALID);
    }

    /* Errors, under MPI_ERRORS_RETURN. */
    OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    OK(MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN));
    FAILS(MPI_ERR_KEYVAL, MPI_Comm_get_attr(MPI_COMM_WORLD, 123456, &got, &flag));
    FAILS(MPI_ERR_KEYVAL, MPI_Comm_set_attr(MPI_COMM_WORLD, MPI_TAG_UB, &data[0]));
    FAILS(MPI_ERR_KEYVAL, MPI_Comm_delete_attr(MPI_COMM_WORLD, MPI_TAG_UB));
    OK(MPI_Type_create_keyval(MPI_TYPE_NULL_COPY_FN, MPI_TYPE_NULL_DELETE_FN, &tkey, NULL));
    FAILS(MPI_ERR_KEYVAL, MPI_Comm_set_attr(MPI_COMM_WORLD, tkey, &data[0]));
    OK(MPI_Type_free_keyval(&tkey));
    FAILS(MPI_ERR_ARG, MPI_Comm_create_keyval(copy_fn, delete_fn, NULL, NULL));
    FAILS(MPI_ERR_COMM, MPI_Comm_set_attr(MPI_COMM_NULL, kdup, &data[0]));
    /* A failing copy callback fails MPI_Comm_dup with its code; a failing
     * delete callback fails MPI_Comm_delete_attr and MPI_Comm_free. */
    int kfail, kdel;
    OK(MPI_Comm_create_keyval(failing_copy_fn, MPI_COMM_NULL_DELETE_FN, &kfail, NULL));
    OK(MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, failing_delete_fn, &kdel, NULL));
    OK(MPI_Comm_dup(MPI_COMM_WORLD, &comm));
    OK(MPI_Comm_set_attr(comm, kfail, &data[0]));
    dup = MPI_COMM_NULL;
    CHECK(MPI_Comm_dup(comm, &dup) == MPI_ERR_OTHER);
    OK(MPI_Comm_delete_attr(comm, kfail));
    int one = 1, zero = 0;
    OK(MPI_Comm_set_attr(comm, kdel, &one));
    CHECK(MPI_Comm_delete_attr(comm, kdel) == MPI_ERR_OTHER);
    CHECK(MPI_Comm_free(&comm) == MPI_ERR_OTHER);
    CHECK(comm != MPI_COMM_NULL);
    /* Replacing the value runs the (failing) delete callback too. */
    CHECK(MPI_Comm_set_attr(comm, kdel, &zero) == MPI_ERR_OTHER);
    one = 0;
    OK(MPI_Comm_free(&comm));
    CHECK(comm == MPI_COMM_NULL);
    OK(MPI_Comm_free_keyval(&kfail));
    OK(MPI_Comm_free_keyval(&kdel));

    /* MPI_Finalize deletes MPI_COMM_SELF's attributes first. */
    int kfin;
    OK(MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, finalize_delete_fn, &kfin, NULL));
    OK(MPI_Comm_set_attr(MPI_COMM_WORLD, kfin, NULL));
    OK(MPI_Comm_set_attr(MPI_COMM_SELF, kfin, NULL));
    OK(MPI_Barrier(MPI_COMM_WORLD));
    OK(MPI_Finalize());
    CHECK(norder == 2 && order[0] == 'S' && order[1] == 'W');
    PASSED("attributes");
    return 0;
}
