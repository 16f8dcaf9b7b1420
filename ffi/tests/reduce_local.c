/* Reduction operations without communication: every predefined operation
 * through MPI_Reduce_local on the types it applies to (integers, floats,
 * complex, logicals, bytes, the value-index pairs, a derived type), the
 * error for a type it does not apply to, and user operations (MPI_Op_create
 * and MPI_Op_create_c, commutative or not, given the buffers in the
 * datatype's layout and the datatype's handle), MPI_Op_commutative and
 * MPI_Op_free. */
#include "check.h"
#include <complex.h>
#include <stdbool.h>
#include <stddef.h>
#include <string.h>

#define N 4

/* inout = in op inout on N ints; checks the result. */
static void ints(MPI_Op op, const int want[N]) {
    int in[N] = {3, 1, 1, 0};
    int acc[N] = {4, -2, 0x7fffffff, 0};
    OK(MPI_Reduce_local(in, acc, N, MPI_INT, op));
    for (int i = 0; i < N; i++) CHECK(acc[i] == want[i]);
}

static void integer_ops(void) {
    const int sum[N] = {7, -1, (int)0x80000000u, 0};
    const int prod[N] = {12, -2, 0x7fffffff, 0};
    const int max[N] = {4, 1, 0x7fffffff, 0};
    const int min[N] = {3, -2, 1, 0};
    const int land[N] = {1, 1, 1, 0};
    const int lor[N] = {1, 1, 1, 0};
    const int lxor[N] = {0, 0, 0, 0};
    const int band[N] = {0, 0, 1, 0};
    const int bor[N] = {7, -1, 0x7fffffff, 0};
    const int bxor[N] = {7, -1, 0x7ffffffe, 0};
    const int replace[N] = {3, 1, 1, 0};
    const int no_op[N] = {4, -2, 0x7fffffff, 0};
    ints(MPI_SUM, sum);
    ints(MPI_PROD, prod);
    ints(MPI_MAX, max);
    ints(MPI_MIN, min);
    ints(MPI_LAND, land);
    ints(MPI_LOR, lor);
    ints(MPI_LXOR, lxor);
    ints(MPI_BAND, band);
    ints(MPI_BOR, bor);
    ints(MPI_BXOR, bxor);
    ints(MPI_REPLACE, replace);
    ints(MPI_NO_OP, no_op);

    unsigned char uc[2] = {200, 0xf0}, uacc[2] = {100, 0x3c};
    OK(MPI_Reduce_local(uc, uacc, 2, MPI_UNSIGNED_CHAR, MPI_SUM));
    CHECK(uacc[0] == 44 && uacc[1] == (unsigned char)(0xf0 + 0x3c));
    unsigned char b[2] = {0xf0, 0x0f}, bacc[2] = {0x3c, 0x3c};
    OK(MPI_Reduce_local(b, bacc, 2, MPI_BYTE, MPI_BXOR));
    CHECK(bacc[0] == 0xcc && bacc[1] == 0x33);
    long long ll[1] = {-5}, llacc[1] = {3};
    OK(MPI_Reduce_local(ll, llacc, 1, MPI_LONG_LONG, MPI_MIN));
    CHECK(llacc[0] == -5);
    int64_t i64[1] = {1LL << 40}, i64acc[1] = {1};
    OK(MPI_Reduce_local(i64, i64acc, 1, MPI_INT64_T, MPI_BOR));
    CHECK(i64acc[0] == (1LL << 40 | 1));
}

static void float_complex_logical_ops(void) {
    double d[3] = {2.0, 3.0, 0.5}, dacc[3] = {1.5, -2.0, 8.0};
    OK(MPI_Reduce_local(d, dacc, 3, MPI_DOUBLE, MPI_MAX));
    CHECK(dacc[0] == 2.0 && dacc[1] == 3.0 && dacc[2] == 8.0);
    OK(MPI_Reduce_local(d, dacc, 3, MPI_DOUBLE, MPI_PROD));
    CHECK(dacc[0] == 4.0 && dacc[1] == 9.0 && dacc[2] == 4.0);
    float f[2] = {1.25f, -1.0f}, facc[2] = {1.0f, -3.0f};
    OK(MPI_Reduce_local(f, facc, 2, MPI_FLOAT, MPI_SUM));
    CHECK(facc[0] == 2.25f && facc[1] == -4.0f);
    OK(MPI_Reduce_local(f, facc, 2, MPI_FLOAT, MPI_MIN));
    CHECK(facc[0] == 1.25f && facc[1] == -4.0f);

    double complex z = 1.0 + 2.0 * I, zacc = 3.0 - 1.0 * I;
    OK(MPI_Reduce_local(&z, &zacc, 1, MPI_C_DOUBLE_COMPLEX, MPI_PROD));
    CHECK(creal(zacc) == 5.0 && cimag(zacc) == 5.0);
    OK(MPI_Reduce_local(&z, &zacc, 1, MPI_C_DOUBLE_COMPLEX, MPI_SUM));
    CHECK(creal(zacc) == 6.0 && cimag(zacc) == 7.0);

    bool l[4] = {true, true, false, false}, lacc[4] = {true, false, true, false};
    OK(MPI_Reduce_local(l, lacc, 4, MPI_C_BOOL, MPI_LXOR));
    CHECK(!lacc[0] && lacc[1] && lacc[2] && !lacc[3]);
    OK(MPI_Reduce_local(l, lacc, 4, MPI_C_BOOL, MPI_LOR));
    CHECK(lacc[0] && lacc[1] && lacc[2] && !lacc[3]);
    OK(MPI_Reduce_local(l, lacc, 4, MPI_C_BOOL, MPI_LAND));
    CHECK(lacc[0] && lacc[1] && !lacc[2] && !lacc[3]);
}

static void loc_ops(void) {
    struct { int v, i; } p[2] = {{3, 4}, {1, 2}}, pacc[2] = {{5, 0}, {1, 7}};
    OK(MPI_Reduce_local(p, pacc, 2, MPI_2INT, MPI_MINLOC));
    CHECK(pacc[0].v == 3 && pacc[0].i == 4 && pacc[1].v == 1 && pacc[1].i == 2);
    OK(MPI_Reduce_local(p, pacc, 2, MPI_2INT, MPI_MAXLOC));
    CHECK(pacc[0].v == 3 && pacc[0].i == 4 && pacc[1].v == 1 && pacc[1].i == 2);
    /* A padded pair: the padding is not data, and stays as it was. */
    struct { double v; int i; } di[3], diacc[3];
    memset(di, 0x11, sizeof di);
    memset(diacc, 0x22, sizeof diacc);
    di[0].v = 1.0, di[0].i = 3, di[1].v = 5.0, di[1].i = 2, di[2].v = 2.0, di[2].i = 9;
    diacc[0].v = 1.0, diacc[0].i = 1, diacc[1].v = 4.0, diacc[1].i = 0;
    diacc[2].v = 2.0, diacc[2].i = 4;
    OK(MPI_Reduce_local(di, diacc, 3, MPI_DOUBLE_INT, MPI_MAXLOC));
    CHECK(diacc[0].v == 1.0 && diacc[0].i == 1);
    CHECK(diacc[1].v == 5.0 && diacc[1].i == 2);
    CHECK(diacc[2].v == 2.0 && diacc[2].i == 4);
    for (int k = 0; k < 3; k++) {
        const unsigned char *pad = (const unsigned char *)&diacc[k] + 12;
        CHECK(pad[0] == 0x22 && pad[3] == 0x22);
    }
    struct { short v; int i; } si = {-4, 6}, siacc = {2, 1};
    OK(MPI_Reduce_local(&si, &siacc, 1, MPI_SHORT_INT, MPI_MINLOC));
    CHECK(siacc.v == -4 && siacc.i == 6);
}

/* A derived type: ints 0 and 2 of every 3; the others are untouched. */
static void derived_type(void) {
    MPI_Datatype gap;
    OK(MPI_Type_vector(2, 1, 2, MPI_INT, &gap));
    OK(MPI_Type_commit(&gap));
    int in[6] = {5, 6, 7, 8, 9, 10}, acc[6] = {1, 1, 1, 1, 1, 1};
    OK(MPI_Reduce_local(in, acc, 2, gap, MPI_SUM));
    const int want[6] = {6, 1, 8, 9, 1, 11};
    for (int i = 0; i < 6; i++) CHECK(acc[i] == want[i]);
    OK(MPI_Type_free(&gap));
}

static void refused(void) {
    double d = 1.0, dacc = 2.0;
    FAILS(MPI_ERR_OP, MPI_Reduce_local(&d, &dacc, 1, MPI_DOUBLE, MPI_BAND));
    _Bool c = 1, cacc = 0;
    FAILS(MPI_ERR_OP, MPI_Reduce_local(&c, &cacc, 1, MPI_C_BOOL, MPI_SUM));
    /* MPI_CHAR reduces as C's char, as in MPICH and Open MPI */
    char ch = 20, chacc = 22;
    OK(MPI_Reduce_local(&ch, &chacc, 1, MPI_CHAR, MPI_SUM));
    CHECK(chacc == 42);
    int x = 1, y = 2;
    FAILS(MPI_ERR_OP, MPI_Reduce_local(&x, &y, 1, MPI_INT, MPI_MAXLOC));
    FAILS(MPI_ERR_OP, MPI_Reduce_local(&x, &y, 1, MPI_INT, MPI_OP_NULL));
    FAILS(MPI_ERR_COUNT, MPI_Reduce_local(&x, &y, -1, MPI_INT, MPI_SUM));
    FAILS(MPI_ERR_TYPE, MPI_Reduce_local(&x, &y, 1, MPI_DATATYPE_NULL, MPI_SUM));
    int same[2] = {1, 2};
    FAILS(MPI_ERR_BUFFER, MPI_Reduce_local(same, same, 2, MPI_INT, MPI_SUM));
    FAILS(MPI_ERR_BUFFER, MPI_Reduce_local(same, same + 1, 2, MPI_INT, MPI_SUM));
    CHECK(y == 2 && cacc == 0 && dacc == 2.0 && same[0] == 1 && same[1] == 2);
    /* A struct of an int and a double mixes basic types. */
    MPI_Datatype mixed;
    int bl[2] = {1, 1};
    MPI_Aint disp[2] = {0, 8};
    MPI_Datatype types[2] = {MPI_INT, MPI_DOUBLE};
    OK(MPI_Type_create_struct(2, bl, disp, types, &mixed));
    OK(MPI_Type_commit(&mixed));
    unsigned char m[16] = {0}, macc[16] = {0};
    FAILS(MPI_ERR_OP, MPI_Reduce_local(m, macc, 1, mixed, MPI_SUM));
    memset(m, 3, sizeof m);
    OK(MPI_Reduce_local(m, macc, 1, mixed, MPI_REPLACE));
    CHECK(macc[0] == 3 && macc[4] == 0 && macc[8] == 3);
    OK(MPI_Type_free(&mixed));
    MPI_Op sum = MPI_SUM;
    FAILS(MPI_ERR_OP, MPI_Op_free(&sum));
}

static MPI_Datatype seen_type;
static int calls;

/* inout = 10 * in + inout: not commutative. */
static void shift_add(void *in, void *inout, int *len, MPI_Datatype *dt) {
    seen_type = *dt;
    calls++;
    const int *a = in;
    int *b = inout;
    for (int i = 0; i < *len; i++) b[i] = 10 * a[i] + b[i];
}

/* Over a vector type: the elements where they are, the gaps skipped. */
static void first_of_pairs(void *in, void *inout, int *len, MPI_Datatype *dt) {
    seen_type = *dt;
    const int *a = in;
    int *b = inout;
    for (int i = 0; i < *len; i++) b[4 * i] -= a[4 * i];
}

static void max_c(void *in, void *inout, MPI_Count *len, MPI_Datatype *dt) {
    (void)dt;
    const double *a = in;
    double *b = inout;
    for (MPI_Count i = 0; i < *len; i++) b[i] = a[i] > b[i] ? a[i] : b[i];
}

static void user_ops(void) {
    MPI_Op op;
    int commute = -1;
    OK(MPI_Op_create(shift_add, 0, &op));
    OK(MPI_Op_commutative(op, &commute));
    CHECK(commute == 0);
    OK(MPI_Op_commutative(MPI_SUM, &commute));
    CHECK(commute == 1);
    int in[2] = {1, 4}, acc[2] = {2, 3};
    OK(MPI_Reduce_local(in, acc, 2, MPI_INT, op));
    CHECK(acc[0] == 12 && acc[1] == 43 && calls == 1 && seen_type == MPI_INT);
    OK(MPI_Op_free(&op));
    CHECK(op == MPI_OP_NULL);

    MPI_Datatype every4, every4r;
    OK(MPI_Type_vector(1, 1, 4, MPI_INT, &every4));
    OK(MPI_Type_create_resized(every4, 0, 4 * sizeof(int), &every4r));
    OK(MPI_Type_commit(&every4r));
    OK(MPI_Op_create(first_of_pairs, 1, &op));
    OK(MPI_Op_commutative(op, &commute));
    CHECK(commute == 1);
    int v[8] = {1, 9, 9, 9, 2, 9, 9, 9}, vacc[8] = {10, 0, 0, 0, 10, 0, 0, 0};
    OK(MPI_Reduce_local(v, vacc, 2, every4r, op));
    CHECK(seen_type == every4r);
    CHECK(vacc[0] == 9 && vacc[4] == 8 && vacc[1] == 0 && vacc[5] == 0);
    MPI_Op dead = op;
    OK(MPI_Op_free(&op));
    FAILS(MPI_ERR_OP, MPI_Reduce_local(v, vacc, 2, every4r, dead));
    FAILS(MPI_ERR_OP, MPI_Op_free(&dead));
    OK(MPI_Type_free(&every4r));
    OK(MPI_Type_free(&every4));

    OK(MPI_Op_create_c(max_c, 1, &op));
    double d[3] = {1.0, 5.0, -1.0}, dacc[3] = {2.0, 4.0, -2.0};
    OK(MPI_Reduce_local_c(d, dacc, 3, MPI_DOUBLE, op));
    CHECK(dacc[0] == 2.0 && dacc[1] == 5.0 && dacc[2] == -1.0);
    OK(MPI_Op_free(&op));
}

int main(int argc, char **argv) {
    OK(MPI_Init(&argc, &argv));
    OK(MPI_Comm_rank(MPI_COMM_WORLD, &check_rank));
    OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    OK(MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN));
    integer_ops();
    float_complex_logical_ops();
    loc_ops();
    derived_type();
    refused();
    user_ops();
    PASSED("reduce_local");
    return MPI_Finalize();
}
