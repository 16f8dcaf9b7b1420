/* Derived datatypes between two ranks: every constructor, sends of
 * non-contiguous data into contiguous buffers and back, padded structs,
 * resized types, pair types, partial messages, nonblocking transfers, pack
 * and unpack; every element checked, and bytes outside the type map left
 * untouched. */
#include "check.h"
#include <stddef.h>
#include <string.h>

#define ROWS 40
#define COLS 30

static int peer;

static void commit(MPI_Datatype *t) { OK(MPI_Type_commit(t)); }

/* A column of a row-major matrix, sent as one vector, received as
 * contiguous doubles; then received back into a column of another matrix. */
static void vector_column(void) {
    static double m[ROWS][COLS], col[ROWS], back[ROWS][COLS];
    MPI_Datatype column;
    OK(MPI_Type_vector(ROWS, 1, COLS, MPI_DOUBLE, &column));
    commit(&column);
    int size;
    MPI_Aint lb, ext;
    OK(MPI_Type_size(column, &size));
    OK(MPI_Type_get_extent(column, &lb, &ext));
    CHECK(size == ROWS * 8 && lb == 0 && ext == (MPI_Aint)(((ROWS - 1) * COLS + 1) * 8));
    if (check_rank == 0) {
        for (int i = 0; i < ROWS; i++)
            for (int j = 0; j < COLS; j++) m[i][j] = i * 100 + j;
        OK(MPI_Send(&m[0][7], 1, column, peer, 1, MPI_COMM_WORLD));
        for (int i = 0; i < ROWS; i++)
            for (int j = 0; j < COLS; j++) back[i][j] = -1;
        OK(MPI_Recv(&back[0][3], 1, column, peer, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        for (int i = 0; i < ROWS; i++)
            for (int j = 0; j < COLS; j++) CHECK(back[i][j] == (j == 3 ? i * 100 + 7 : -1));
    } else {
        MPI_Status st;
        int n;
        OK(MPI_Recv(col, ROWS, MPI_DOUBLE, peer, 1, MPI_COMM_WORLD, &st));
        OK(MPI_Get_count(&st, MPI_DOUBLE, &n));
        CHECK(n == ROWS);
        for (int i = 0; i < ROWS; i++) CHECK(col[i] == i * 100 + 7);
        OK(MPI_Send(col, ROWS, MPI_DOUBLE, peer, 2, MPI_COMM_WORLD));
    }
    OK(MPI_Type_free(&column));
}

/* Two columns at once: a vector resized to one element's extent. */
static void resized_columns(void) {
    static int m[ROWS][COLS], got[2][ROWS];
    MPI_Datatype column, col1;
    OK(MPI_Type_vector(ROWS, 1, COLS, MPI_INT, &column));
    OK(MPI_Type_create_resized(column, 0, sizeof(int), &col1));
    commit(&col1);
    MPI_Aint lb, ext, tlb, text;
    OK(MPI_Type_get_extent(col1, &lb, &ext));
    OK(MPI_Type_get_true_extent(col1, &tlb, &text));
    CHECK(lb == 0 && ext == sizeof(int) && tlb == 0 && text == (MPI_Aint)(((ROWS - 1) * COLS + 1) * sizeof(int)));
    MPI_Count clb = -1, cext = -1, ctlb = -1, ctext = -1, xtlb = -1, xtext = -1;
    OK(MPI_Type_get_extent_c(col1, &clb, &cext));
    OK(MPI_Type_get_true_extent_c(col1, &ctlb, &ctext));
    OK(MPI_Type_get_true_extent_x(col1, &xtlb, &xtext));
    CHECK(clb == lb && cext == ext && ctlb == tlb && ctext == text && xtlb == tlb && xtext == text);
    if (check_rank == 0) {
        for (int i = 0; i < ROWS; i++)
            for (int j = 0; j < COLS; j++) m[i][j] = i * 1000 + j;
        OK(MPI_Send(&m[0][5], 2, col1, peer, 3, MPI_COMM_WORLD));
    } else {
        OK(MPI_Recv(got, 2 * ROWS, MPI_INT, peer, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        for (int k = 0; k < 2; k++)
            for (int i = 0; i < ROWS; i++) CHECK(got[k][i] == i * 1000 + 5 + k);
    }
    OK(MPI_Type_free(&col1));
    OK(MPI_Type_free(&column));
}

/* The lower triangle of a matrix with MPI_Type_indexed, received into the
 * same type on the other side (the upper part stays untouched). */
static void indexed_triangle(void) {
    enum { N = 16 };
    static float a[N][N];
    int bl[N], disp[N];
    for (int i = 0; i < N; i++) {
        bl[i] = i + 1;
        disp[i] = i * N;
    }
    MPI_Datatype tri;
    OK(MPI_Type_indexed(N, bl, disp, MPI_FLOAT, &tri));
    commit(&tri);
    int size;
    OK(MPI_Type_size(tri, &size));
    CHECK(size == (int)(N * (N + 1) / 2 * sizeof(float)));
    for (int i = 0; i < N; i++)
        for (int j = 0; j < N; j++) a[i][j] = check_rank == 0 ? (float)(i * N + j) : -1.0f;
    if (check_rank == 0) {
        OK(MPI_Send(a, 1, tri, peer, 4, MPI_COMM_WORLD));
    } else {
        OK(MPI_Recv(a, 1, tri, peer, 4, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        for (int i = 0; i < N; i++)
            for (int j = 0; j < N; j++) CHECK(a[i][j] == (j <= i ? (float)(i * N + j) : -1.0f));
    }
    OK(MPI_Type_free(&tri));
}

/* hvector, hindexed, indexed_block and hindexed_block, nested in a
 * contiguous type. */
static void h_and_block_types(void) {
    static long buf[256], got[256];
    MPI_Datatype hv, hi, ib, hib, cont;
    OK(MPI_Type_create_hvector(4, 2, 5 * sizeof(long), MPI_LONG, &hv));        /* 0,1,5,6,10,11,15,16 */
    MPI_Aint hd[3] = {0, 9 * sizeof(long), 3 * sizeof(long)};
    int hbl[3] = {1, 2, 1};
    OK(MPI_Type_create_hindexed(3, hbl, hd, MPI_LONG, &hi));                    /* 0,9,10,3 */
    int idisp[3] = {4, 0, 12};
    OK(MPI_Type_create_indexed_block(3, 2, idisp, MPI_LONG, &ib));              /* 4,5,0,1,12,13 */
    MPI_Aint hbd[2] = {2 * sizeof(long), 20 * sizeof(long)};
    OK(MPI_Type_create_hindexed_block(2, 3, hbd, MPI_LONG, &hib));              /* 2,3,4,20,21,22 */
    OK(MPI_Type_contiguous(3, hv, &cont)); /* hv's extent: 17 longs */
    MPI_Datatype all[5] = {hv, hi, ib, hib, cont};
    int expect_n[5] = {8, 4, 6, 6, 24};
    long order[5][24] = {
        {0, 1, 5, 6, 10, 11, 15, 16},
        {0, 9, 10, 3},
        {4, 5, 0, 1, 12, 13},
        {2, 3, 4, 20, 21, 22},
        {0, 1, 5, 6, 10, 11, 15, 16, 17, 18, 22, 23, 27, 28, 32, 33, 34, 35, 39, 40, 44, 45, 49, 50},
    };
    for (int t = 0; t < 5; t++) {
        commit(&all[t]);
        if (check_rank == 0) {
            for (int i = 0; i < 256; i++) buf[i] = 1000 * t + i;
            OK(MPI_Send(buf, 1, all[t], peer, 10 + t, MPI_COMM_WORLD));
        } else {
            MPI_Status st;
            int n;
            OK(MPI_Recv(got, 256, MPI_LONG, peer, 10 + t, MPI_COMM_WORLD, &st));
            OK(MPI_Get_count(&st, MPI_LONG, &n));
            CHECK(n == expect_n[t]);
            for (int i = 0; i < n; i++) CHECK(got[i] == 1000 * t + order[t][i]);
        }
    }
    for (int t = 0; t < 5; t++) OK(MPI_Type_free(&all[t]));
}

/* An array of C structs, with the struct type's extent padded to the C
 * layout; padding bytes are neither sent nor overwritten. */
struct particle {
    int id;
    double pos[3];
    char tag;
};

static void structs(void) {
    enum { N = 50 };
    struct particle p[N];
    int bl[3] = {1, 3, 1};
    MPI_Aint d[3] = {offsetof(struct particle, id), offsetof(struct particle, pos), offsetof(struct particle, tag)};
    MPI_Datatype types[3] = {MPI_INT, MPI_DOUBLE, MPI_CHAR}, pt;
    OK(MPI_Type_create_struct(3, bl, d, types, &pt));
    commit(&pt);
    MPI_Aint lb, ext;
    int size;
    OK(MPI_Type_get_extent(pt, &lb, &ext));
    OK(MPI_Type_size(pt, &size));
    CHECK(lb == 0 && ext == sizeof(struct particle) && size == 4 + 24 + 1);
    memset(p, check_rank == 0 ? 0 : 0xee, sizeof p);
    if (check_rank == 0) {
        for (int i = 0; i < N; i++) {
            p[i].id = i;
            p[i].pos[0] = i + 0.25;
            p[i].pos[1] = -i;
            p[i].pos[2] = i * 2.5;
            p[i].tag = (char)('a' + i % 26);
        }
        OK(MPI_Send(p, N, pt, peer, 20, MPI_COMM_WORLD));
    } else {
        MPI_Status st;
        int n;
        OK(MPI_Recv(p, N, pt, peer, 20, MPI_COMM_WORLD, &st));
        OK(MPI_Get_count(&st, pt, &n));
        CHECK(n == N);
        for (int i = 0; i < N; i++) {
            CHECK(p[i].id == i && p[i].pos[0] == i + 0.25 && p[i].pos[1] == -i && p[i].pos[2] == i * 2.5);
            CHECK(p[i].tag == (char)('a' + i % 26));
            /* The padding between id and pos kept its old bytes. */
            const unsigned char *pad = (const unsigned char *)&p[i] + sizeof(int);
            CHECK(pad[0] == 0xee);
        }
    }
    /* A duplicate of a committed type is committed. */
    MPI_Datatype dup;
    OK(MPI_Type_dup(pt, &dup));
    if (check_rank == 0) {
        OK(MPI_Send(p, 2, dup, peer, 21, MPI_COMM_WORLD));
    } else {
        struct particle q[2];
        OK(MPI_Recv(q, 2, dup, peer, 21, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        CHECK(q[1].id == 1 && q[1].tag == 'b');
    }
    OK(MPI_Type_free(&dup));
    OK(MPI_Type_free(&pt));
}

/* Pair types with padding (MPI_DOUBLE_INT, MPI_SHORT_INT). */
static void pair_types(void) {
    struct { double v; int i; } di[10];
    struct { short v; int i; } si[10];
    memset(di, 0, sizeof di);
    memset(si, 0, sizeof si);
    if (check_rank == 0) {
        for (int k = 0; k < 10; k++) {
            di[k].v = k * 1.5;
            di[k].i = -k;
            si[k].v = (short)(k * 3);
            si[k].i = k * 7;
        }
        OK(MPI_Send(di, 10, MPI_DOUBLE_INT, peer, 30, MPI_COMM_WORLD));
        OK(MPI_Send(si, 10, MPI_SHORT_INT, peer, 31, MPI_COMM_WORLD));
    } else {
        OK(MPI_Recv(di, 10, MPI_DOUBLE_INT, peer, 30, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        OK(MPI_Recv(si, 10, MPI_SHORT_INT, peer, 31, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        for (int k = 0; k < 10; k++) {
            CHECK(di[k].v == k * 1.5 && di[k].i == -k);
            CHECK(si[k].v == k * 3 && si[k].i == k * 7);
        }
    }
}

/* A message shorter than the receive: elements fill as far as the bytes
 * go, and MPI_Get_count says MPI_UNDEFINED when they end mid-element. */
static void partial_messages(void) {
    MPI_Datatype pair, gap;
    OK(MPI_Type_contiguous(2, MPI_INT, &pair));
    commit(&pair);
    OK(MPI_Type_vector(2, 1, 2, MPI_INT, &gap)); /* ints 0 and 2 */
    commit(&gap);
    if (check_rank == 0) {
        int v[5] = {1, 2, 3, 4, 5};
        OK(MPI_Send(v, 5, MPI_INT, peer, 40, MPI_COMM_WORLD));
        OK(MPI_Send(v, 3, MPI_INT, peer, 41, MPI_COMM_WORLD));
    } else {
        int got[8], n;
        MPI_Status st;
        for (int i = 0; i < 8; i++) got[i] = -1;
        OK(MPI_Recv(got, 4, pair, peer, 40, MPI_COMM_WORLD, &st));
        OK(MPI_Get_count(&st, pair, &n));
        CHECK(n == MPI_UNDEFINED);
        OK(MPI_Get_count(&st, MPI_INT, &n));
        CHECK(n == 5 && got[4] == 5 && got[5] == -1);
        MPI_Count c = 0;
        OK(MPI_Get_count_c(&st, pair, &c));
        CHECK(c == MPI_UNDEFINED);
        OK(MPI_Get_count_c(&st, MPI_INT, &c));
        CHECK(c == 5);
        /* The status accessors read and write the public fields. */
        int source = -1, tag = -1, error = -1;
        OK(MPI_Status_get_source(&st, &source));
        OK(MPI_Status_get_tag(&st, &tag));
        OK(MPI_Status_get_error(&st, &error));
        CHECK(source == peer && tag == 40 && error == st.MPI_ERROR);
        MPI_Status mine = st;
        OK(MPI_Status_set_source(&mine, 7));
        OK(MPI_Status_set_tag(&mine, 8));
        OK(MPI_Status_set_error(&mine, MPI_ERR_TRUNCATE));
        OK(MPI_Status_set_cancelled(&mine, 1));
        OK(MPI_Test_cancelled(&mine, &n));
        CHECK(mine.MPI_SOURCE == 7 && mine.MPI_TAG == 8 && mine.MPI_ERROR == MPI_ERR_TRUNCATE && n);
        OK(MPI_Get_count_c(&mine, MPI_INT, &c));
        CHECK(c == 5);
        for (int i = 0; i < 8; i++) got[i] = -1;
        OK(MPI_Recv(got, 3, gap, peer, 41, MPI_COMM_WORLD, &st)); /* room for 6 ints */
        OK(MPI_Get_count(&st, gap, &n));
        CHECK(n == MPI_UNDEFINED);
        /* Element 0: ints 0 and 2; element 1 (extent 3 ints): int 3. */
        CHECK(got[0] == 1 && got[1] == -1 && got[2] == 2 && got[3] == 3 && got[4] == -1 && got[5] == -1);
    }
    OK(MPI_Type_free(&pair));
    OK(MPI_Type_free(&gap));
}

/* Nonblocking sends and receives of derived types; a type freed while
 * its operations are pending. */
static void nonblocking(void) {
    enum { N = 1000 };
    static int m[N][4];
    MPI_Datatype firsts;
    OK(MPI_Type_vector(N, 1, 4, MPI_INT, &firsts));
    commit(&firsts);
    MPI_Request r;
    if (check_rank == 0) {
        for (int i = 0; i < N; i++) m[i][0] = i * 3;
        OK(MPI_Isend(m, 1, firsts, peer, 50, MPI_COMM_WORLD, &r));
        OK(MPI_Type_free(&firsts));
        for (int i = 0; i < N; i++) m[i][1] = 99; /* outside the type map */
        OK(MPI_Wait(&r, MPI_STATUS_IGNORE));
    } else {
        for (int i = 0; i < N; i++)
            for (int j = 0; j < 4; j++) m[i][j] = -7;
        OK(MPI_Irecv(m, 1, firsts, peer, 50, MPI_COMM_WORLD, &r));
        OK(MPI_Type_free(&firsts));
        int flag = 0;
        MPI_Status st;
        while (!flag) OK(MPI_Test(&r, &flag, &st));
        for (int i = 0; i < N; i++) CHECK(m[i][0] == i * 3 && m[i][1] == -7 && m[i][3] == -7);
    }
}

/* Negative strides: a vector walking backwards through memory. */
static void negative_stride(void) {
    double v[10];
    MPI_Datatype back;
    OK(MPI_Type_vector(5, 1, -2, MPI_DOUBLE, &back)); /* 0, -2, -4, -6, -8 */
    commit(&back);
    MPI_Aint lb, ext;
    OK(MPI_Type_get_extent(back, &lb, &ext));
    CHECK(lb == -8 * (MPI_Aint)sizeof(double) && ext == 9 * (MPI_Aint)sizeof(double));
    if (check_rank == 0) {
        for (int i = 0; i < 10; i++) v[i] = i;
        OK(MPI_Send(&v[9], 1, back, peer, 60, MPI_COMM_WORLD));
    } else {
        OK(MPI_Recv(v, 5, MPI_DOUBLE, peer, 60, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        for (int i = 0; i < 5; i++) CHECK(v[i] == 9 - 2 * i);
    }
    OK(MPI_Type_free(&back));
}

/* MPI_Pack / MPI_Unpack / MPI_Pack_size, and a packed message. */
static void pack_unpack(void) {
    int ints[6] = {1, 2, 3, 4, 5, 6}, size, pos = 0;
    double d = 2.75;
    MPI_Datatype odd;
    OK(MPI_Type_vector(3, 1, 2, MPI_INT, &odd)); /* 1, 3, 5 */
    commit(&odd);
    OK(MPI_Pack_size(1, odd, MPI_COMM_WORLD, &size));
    CHECK(size == 12);
    char buf[64];
    OK(MPI_Pack(ints, 1, odd, buf, sizeof buf, &pos, MPI_COMM_WORLD));
    OK(MPI_Pack(&d, 1, MPI_DOUBLE, buf, sizeof buf, &pos, MPI_COMM_WORLD));
    CHECK(pos == 20);
    if (check_rank == 0) {
        OK(MPI_Send(buf, pos, MPI_PACKED, peer, 70, MPI_COMM_WORLD));
    } else {
        char in[64];
        int out[6] = {0}, n, p = 0;
        double e = 0;
        MPI_Status st;
        OK(MPI_Recv(in, sizeof in, MPI_PACKED, peer, 70, MPI_COMM_WORLD, &st));
        OK(MPI_Get_count(&st, MPI_PACKED, &n));
        CHECK(n == 20);
        OK(MPI_Unpack(in, n, &p, out, 1, odd, MPI_COMM_WORLD));
        OK(MPI_Unpack(in, n, &p, &e, 1, MPI_DOUBLE, MPI_COMM_WORLD));
        CHECK(p == 20 && out[0] == 1 && out[1] == 0 && out[2] == 3 && out[4] == 5 && e == 2.75);
    }
    OK(MPI_Type_free(&odd));
}

/* MPI_BOTTOM with absolute addresses from MPI_Get_address. */
static void bottom(void) {
    int a = check_rank == 0 ? 11 : 0;
    double b = check_rank == 0 ? 2.5 : 0;
    MPI_Aint d[2];
    OK(MPI_Get_address(&a, &d[0]));
    OK(MPI_Get_address(&b, &d[1]));
    int bl[2] = {1, 1};
    MPI_Datatype t[2] = {MPI_INT, MPI_DOUBLE}, abs_t;
    OK(MPI_Type_create_struct(2, bl, d, t, &abs_t));
    commit(&abs_t);
    if (check_rank == 0) {
        OK(MPI_Send(MPI_BOTTOM, 1, abs_t, peer, 80, MPI_COMM_WORLD));
    } else {
        OK(MPI_Recv(MPI_BOTTOM, 1, abs_t, peer, 80, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        CHECK(a == 11 && b == 2.5);
    }
    OK(MPI_Type_free(&abs_t));
}

int main(int argc, char **argv) {
    OK(MPI_Init(&argc, &argv));
    OK(MPI_Comm_rank(MPI_COMM_WORLD, &check_rank));
    int size;
    OK(MPI_Comm_size(MPI_COMM_WORLD, &size));
    CHECK(size == 2);
    peer = 1 - check_rank;
    vector_column();
    resized_columns();
    indexed_triangle();
    h_and_block_types();
    structs();
    pair_types();
    partial_messages();
    nonblocking();
    negative_stride();
    pack_unpack();
    bottom();
    OK(MPI_Finalize());
    PASSED("datatypes");
    return 0;
}
