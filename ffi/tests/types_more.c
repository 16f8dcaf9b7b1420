/* Subarrays, distributed arrays, the large-count constructors, decoding
 * types (envelope and contents), types by size and Fortran kind, and the
 * external32 representation:
 *
 * - a halo exchange on a ring: each rank sends its first and last interior
 *   columns of a 6x7 array of doubles as subarrays into its neighbours'
 *   ghost columns; every byte of the array is checked afterwards;
 * - a darray (cyclic(2) x block, C and Fortran order) packs exactly the
 *   elements this rank owns, in the order of its local array;
 * - each _c constructor makes the type its int form makes;
 * - envelope and contents give back every constructor's arguments;
 * - external32 bytes of known values, a round trip, and a packed message
 *   sent to the next rank and unpacked there. */
#include "check.h"
#include <string.h>

#define ROWS 6
#define COLS 7

static double value(int rank, int i, int j) { return rank * 10000.0 + i * 100.0 + j; }

/* Two types pack the same bytes from the same ints and have the same
 * size and bounds. */
static void same_type(MPI_Datatype a, MPI_Datatype b) {
    static int src[512];
    for (int i = 0; i < 512; i++) src[i] = i;
    MPI_Count sa, sb, lba, lbb, ea, eb;
    OK(MPI_Type_size_c(a, &sa));
    OK(MPI_Type_size_c(b, &sb));
    OK(MPI_Type_get_extent_c(a, &lba, &ea));
    OK(MPI_Type_get_extent_c(b, &lbb, &eb));
    CHECK(sa == sb && lba == lbb && ea == eb);
    CHECK(sa <= 1024);
    char pa[1024], pb[1024];
    int qa = 0, qb = 0;
    OK(MPI_Pack(src + 64, 1, a, pa, sizeof pa, &qa, MPI_COMM_WORLD));
    OK(MPI_Pack(src + 64, 1, b, pb, sizeof pb, &qb, MPI_COMM_WORLD));
    CHECK(qa == qb && qa == sa && memcmp(pa, pb, (size_t)qa) == 0);
}

static void commit2(MPI_Datatype *a, MPI_Datatype *b) {
    OK(MPI_Type_commit(a));
    OK(MPI_Type_commit(b));
}

static void free2(MPI_Datatype *a, MPI_Datatype *b) {
    OK(MPI_Type_free(a));
    OK(MPI_Type_free(b));
}

/* Commits two types, checks they are the same and frees them. */
static void pair(MPI_Datatype *a, MPI_Datatype *b) {
    commit2(a, b);
    same_type(*a, *b);
    free2(a, b);
}

static void halo(int rank, int size) {
    double a[ROWS][COLS], want[ROWS][COLS];
    for (int i = 0; i < ROWS; i++)
        for (int j = 0; j < COLS; j++) {
            int interior = i > 0 && i < ROWS - 1 && j > 0 && j < COLS - 1;
            a[i][j] = interior ? value(rank, i, j) : -1.0;
        }
    memcpy(want, a, sizeof a);
    int left = (rank + size - 1) % size, right = (rank + 1) % size;
    for (int i = 1; i < ROWS - 1; i++) {
        want[i][0] = value(left, i, COLS - 2);
        want[i][COLS - 1] = value(right, i, 1);
    }

    int sizes[2] = {ROWS, COLS}, sub[2] = {ROWS - 2, 1};
    int first[2] = {1, 1}, last[2] = {1, COLS - 2}, ghost_l[2] = {1, 0}, ghost_r[2] = {1, COLS - 1};
    MPI_Datatype send_l, send_r, recv_l, recv_r;
    OK(MPI_Type_create_subarray(2, sizes, sub, first, MPI_ORDER_C, MPI_DOUBLE, &send_l));
    OK(MPI_Type_create_subarray(2, sizes, sub, last, MPI_ORDER_C, MPI_DOUBLE, &send_r));
    OK(MPI_Type_create_subarray(2, sizes, sub, ghost_l, MPI_ORDER_C, MPI_DOUBLE, &recv_l));
    /* The right ghost column in Fortran order: the dimensions reversed. */
    int fsizes[2] = {COLS, ROWS}, fsub[2] = {1, ROWS - 2}, fghost_r[2] = {COLS - 1, 1};
    OK(MPI_Type_create_subarray(2, fsizes, fsub, fghost_r, MPI_ORDER_FORTRAN, MPI_DOUBLE, &recv_r));
    MPI_Datatype *all[4] = {&send_l, &send_r, &recv_l, &recv_r};
    for (int k = 0; k < 4; k++) {
        OK(MPI_Type_commit(all[k]));
        MPI_Aint lb, extent;
        int bytes;
        OK(MPI_Type_get_extent(*all[k], &lb, &extent));
        OK(MPI_Type_size(*all[k], &bytes));
        CHECK(lb == 0 && extent == (MPI_Aint)sizeof a && bytes == (ROWS - 2) * 8);
    }
    {
        /* The same column in both orders is the same type. */
        MPI_Datatype c_r;
        OK(MPI_Type_create_subarray(2, sizes, sub, ghost_r, MPI_ORDER_C, MPI_DOUBLE, &c_r));
        OK(MPI_Type_commit(&c_r));
        same_type(c_r, recv_r);
        OK(MPI_Type_free(&c_r));
    }

    MPI_Request reqs[4];
    OK(MPI_Irecv(a, 1, recv_l, left, 1, MPI_COMM_WORLD, &reqs[0]));
    OK(MPI_Irecv(a, 1, recv_r, right, 2, MPI_COMM_WORLD, &reqs[1]));
    OK(MPI_Isend(a, 1, send_r, right, 1, MPI_COMM_WORLD, &reqs[2]));
    OK(MPI_Isend(a, 1, send_l, left, 2, MPI_COMM_WORLD, &reqs[3]));
    OK(MPI_Waitall(4, reqs, MPI_STATUSES_IGNORE));
    CHECK(memcmp(a, want, sizeof a) == 0);
    for (int k = 0; k < 4; k++) OK(MPI_Type_free(all[k]));

    /* Bad subarrays. */
    int too_big[2] = {ROWS, COLS + 1};
    MPI_Datatype bad = MPI_DATATYPE_NULL;
    FAILS(MPI_ERR_ARG, MPI_Type_create_subarray(2, sizes, too_big, first, MPI_ORDER_C, MPI_DOUBLE, &bad));
    FAILS(MPI_ERR_ARG, MPI_Type_create_subarray(2, sizes, sub, ghost_r, 3, MPI_DOUBLE, &bad));
    CHECK(bad == MPI_DATATYPE_NULL);
}

/* The ints this rank owns of a 7x5 global array, cyclic(2) over the
 * ranks in dimension 0 and not split in dimension 1. */
static void darray(int rank, int size) {
    enum { G0 = 7, G1 = 5 };
    int global[G0 * G1];
    for (int k = 0; k < G0 * G1; k++) global[k] = k;
    int gsizes[2] = {G0, G1}, distribs[2] = {MPI_DISTRIBUTE_CYCLIC, MPI_DISTRIBUTE_BLOCK};
    int dargs[2] = {2, MPI_DISTRIBUTE_DFLT_DARG}, psizes[2] = {size, 1};
    for (int fortran = 0; fortran < 2; fortran++) {
        MPI_Datatype t;
        OK(MPI_Type_create_darray(size, rank, 2, gsizes, distribs, dargs, psizes,
                                  fortran ? MPI_ORDER_FORTRAN : MPI_ORDER_C, MPI_INT, &t));
        OK(MPI_Type_commit(&t));
        MPI_Aint lb, extent;
        OK(MPI_Type_get_extent(t, &lb, &extent));
        CHECK(lb == 0 && extent == G0 * G1 * (MPI_Aint)sizeof(int));
        int want[G0 * G1], n = 0;
        /* Local order: C is row by row, Fortran column by column. */
        for (int outer = 0; outer < (fortran ? G1 : G0); outer++)
            for (int inner = 0; inner < (fortran ? G0 : G1); inner++) {
                int i = fortran ? inner : outer, j = fortran ? outer : inner;
                if ((i / 2) % size == rank) want[n++] = fortran ? i + j * G0 : i * G1 + j;
            }
        int bytes;
        OK(MPI_Type_size(t, &bytes));
        CHECK(bytes == n * (int)sizeof(int));
        int got[G0 * G1], pos = 0;
        OK(MPI_Pack(global, 1, t, got, sizeof got, &pos, MPI_COMM_WORLD));
        CHECK(pos == bytes && memcmp(got, want, (size_t)bytes) == 0);

        /* Its envelope and contents are its arguments. */
        int ni, na, nd, comb;
        OK(MPI_Type_get_envelope(t, &ni, &na, &nd, &comb));
        CHECK(comb == MPI_COMBINER_DARRAY && ni == 4 * 2 + 4 && na == 0 && nd == 1);
        int ints[12];
        MPI_Datatype old;
        OK(MPI_Type_get_contents(t, 12, 0, 1, ints, NULL, &old));
        int expect[12] = {size, rank, 2, G0, G1, MPI_DISTRIBUTE_CYCLIC, MPI_DISTRIBUTE_BLOCK,
                          2, MPI_DISTRIBUTE_DFLT_DARG, size, 1,
                          fortran ? MPI_ORDER_FORTRAN : MPI_ORDER_C};
        CHECK(memcmp(ints, expect, sizeof ints) == 0 && old == MPI_INT);

        /* The _c form makes the same type. */
        MPI_Count cg[2] = {G0, G1};
        MPI_Datatype tc;
        OK(MPI_Type_create_darray_c(size, rank, 2, cg, distribs, dargs, psizes,
                                    fortran ? MPI_ORDER_FORTRAN : MPI_ORDER_C, MPI_INT, &tc));
        OK(MPI_Type_commit(&tc));
        same_type(t, tc);
        free2(&t, &tc);
    }
    MPI_Datatype bad = MPI_DATATYPE_NULL;
    int wrong_grid[2] = {size + 1, 1};
    FAILS(MPI_ERR_ARG, MPI_Type_create_darray(size, rank, 2, gsizes, distribs, dargs, wrong_grid,
                                              MPI_ORDER_C, MPI_INT, &bad));
    int bad_dist[2] = {MPI_DISTRIBUTE_CYCLIC, 99};
    FAILS(MPI_ERR_ARG, MPI_Type_create_darray(size, rank, 2, gsizes, bad_dist, dargs, psizes,
                                              MPI_ORDER_C, MPI_INT, &bad));
    CHECK(bad == MPI_DATATYPE_NULL);
}

static void large_count_constructors(void) {
    MPI_Datatype a, b;
    OK(MPI_Type_contiguous(5, MPI_INT, &a));
    OK(MPI_Type_contiguous_c(5, MPI_INT, &b));
    pair(&a, &b);

    OK(MPI_Type_vector(3, 2, 5, MPI_INT, &a));
    OK(MPI_Type_vector_c(3, 2, 5, MPI_INT, &b));
    commit2(&a, &b);
    same_type(a, b);
    /* Large-count types have large counts in their envelope. */
    MPI_Count ni, na, nc, nd;
    int comb;
    OK(MPI_Type_get_envelope_c(b, &ni, &na, &nc, &nd, &comb));
    CHECK(comb == MPI_COMBINER_VECTOR && ni == 0 && na == 0 && nc == 3 && nd == 1);
    MPI_Count counts[3];
    MPI_Datatype old;
    OK(MPI_Type_get_contents_c(b, 0, 0, 3, 1, NULL, NULL, counts, &old));
    CHECK(counts[0] == 3 && counts[1] == 2 && counts[2] == 5 && old == MPI_INT);
    int ini, ina, ind;
    FAILS(MPI_ERR_TYPE, MPI_Type_get_envelope(b, &ini, &ina, &ind, &comb));
    /* The _c forms decode int-form types too. */
    OK(MPI_Type_get_envelope_c(a, &ni, &na, &nc, &nd, &comb));
    CHECK(comb == MPI_COMBINER_VECTOR && ni == 3 && nc == 0);
    free2(&a, &b);

    OK(MPI_Type_create_hvector(3, 2, -12, MPI_INT, &a));
    OK(MPI_Type_create_hvector_c(3, 2, -12, MPI_INT, &b));
    pair(&a, &b);

    int bl[3] = {2, 0, 3}, disp[3] = {7, 1, -4};
    MPI_Count cbl[3] = {2, 0, 3}, cdisp[3] = {7, 1, -4}, cbdisp[3] = {28, 4, -16};
    MPI_Aint adisp[3] = {28, 4, -16};
    OK(MPI_Type_indexed(3, bl, disp, MPI_INT, &a));
    OK(MPI_Type_indexed_c(3, cbl, cdisp, MPI_INT, &b));
    pair(&a, &b);

    OK(MPI_Type_create_hindexed(3, bl, adisp, MPI_INT, &a));
    OK(MPI_Type_create_hindexed_c(3, cbl, cbdisp, MPI_INT, &b));
    commit2(&a, &b);
    same_type(a, b);
    OK(MPI_Type_get_envelope_c(b, &ni, &na, &nc, &nd, &comb));
    CHECK(comb == MPI_COMBINER_HINDEXED && ni == 0 && na == 0 && nc == 7 && nd == 1);
    free2(&a, &b);

    OK(MPI_Type_create_indexed_block(3, 2, disp, MPI_INT, &a));
    OK(MPI_Type_create_indexed_block_c(3, 2, cdisp, MPI_INT, &b));
    pair(&a, &b);

    OK(MPI_Type_create_hindexed_block(3, 2, adisp, MPI_INT, &a));
    OK(MPI_Type_create_hindexed_block_c(3, 2, cbdisp, MPI_INT, &b));
    pair(&a, &b);

    MPI_Datatype types[2] = {MPI_INT, MPI_SHORT};
    int sbl[2] = {2, 3};
    MPI_Aint sdisp[2] = {0, 12};
    MPI_Count csbl[2] = {2, 3}, csdisp[2] = {0, 12};
    OK(MPI_Type_create_struct(2, sbl, sdisp, types, &a));
    OK(MPI_Type_create_struct_c(2, csbl, csdisp, types, &b));
    pair(&a, &b);

    OK(MPI_Type_create_resized(MPI_INT, -4, 16, &a));
    OK(MPI_Type_create_resized_c(MPI_INT, -4, 16, &b));
    pair(&a, &b);

    int sizes[3] = {4, 3, 5}, sub[3] = {2, 2, 3}, starts[3] = {1, 0, 2};
    MPI_Count csizes[3] = {4, 3, 5}, csub[3] = {2, 2, 3}, cstarts[3] = {1, 0, 2};
    OK(MPI_Type_create_subarray(3, sizes, sub, starts, MPI_ORDER_FORTRAN, MPI_INT, &a));
    OK(MPI_Type_create_subarray_c(3, csizes, csub, cstarts, MPI_ORDER_FORTRAN, MPI_INT, &b));
    commit2(&a, &b);
    same_type(a, b);
    OK(MPI_Type_get_envelope_c(b, &ni, &na, &nc, &nd, &comb));
    CHECK(comb == MPI_COMBINER_SUBARRAY && ni == 2 && nc == 9 && nd == 1);
    free2(&a, &b);

    FAILS(MPI_ERR_COUNT, MPI_Type_contiguous_c(-1, MPI_INT, &a));
    FAILS(MPI_ERR_ARG, MPI_Type_vector_c(2, -1, 1, MPI_INT, &a));
}

static void envelopes_and_contents(void) {
    int ni, na, nd, comb;
    OK(MPI_Type_get_envelope(MPI_DOUBLE, &ni, &na, &nd, &comb));
    CHECK(comb == MPI_COMBINER_NAMED && ni == 0 && na == 0 && nd == 0);
    int ints[16];
    MPI_Aint addrs[8];
    MPI_Datatype types[4];
    FAILS(MPI_ERR_TYPE, MPI_Type_get_contents(MPI_DOUBLE, 0, 0, 0, ints, addrs, types));

    MPI_Datatype vec, st, res, dup, sub;
    OK(MPI_Type_vector(3, 2, 5, MPI_INT, &vec));
    OK(MPI_Type_get_envelope(vec, &ni, &na, &nd, &comb));
    CHECK(comb == MPI_COMBINER_VECTOR && ni == 3 && na == 0 && nd == 1);
    OK(MPI_Type_get_contents(vec, 3, 0, 1, ints, addrs, types));
    CHECK(ints[0] == 3 && ints[1] == 2 && ints[2] == 5 && types[0] == MPI_INT);
    /* Too small arrays are an error. */
    FAILS(MPI_ERR_ARG, MPI_Type_get_contents(vec, 2, 0, 1, ints, addrs, types));

    /* A struct of a predefined and a derived type: the derived one comes
     * back as a new handle to a type equal to it, which the program frees. */
    int bl[2] = {1, 2};
    MPI_Aint disp[2] = {0, 64};
    MPI_Datatype members[2] = {MPI_CHAR, vec};
    OK(MPI_Type_create_struct(2, bl, disp, members, &st));
    OK(MPI_Type_get_envelope(st, &ni, &na, &nd, &comb));
    CHECK(comb == MPI_COMBINER_STRUCT && ni == 3 && na == 2 && nd == 2);
    OK(MPI_Type_get_contents(st, 16, 8, 4, ints, addrs, types));
    CHECK(ints[0] == 2 && ints[1] == 1 && ints[2] == 2 && addrs[0] == 0 && addrs[1] == 64);
    CHECK(types[0] == MPI_CHAR && types[1] != vec && types[1] != MPI_DATATYPE_NULL);
    OK(MPI_Type_get_envelope(types[1], &ni, &na, &nd, &comb));
    CHECK(comb == MPI_COMBINER_VECTOR && ni == 3);
    OK(MPI_Type_commit(&types[1]));
    OK(MPI_Type_commit(&vec));
    same_type(types[1], vec);
    OK(MPI_Type_free(&types[1]));

    OK(MPI_Type_create_resized(st, -8, 256, &res));
    OK(MPI_Type_get_envelope(res, &ni, &na, &nd, &comb));
    CHECK(comb == MPI_COMBINER_RESIZED && ni == 0 && na == 2 && nd == 1);
    OK(MPI_Type_get_contents(res, 0, 2, 1, ints, addrs, types));
    CHECK(addrs[0] == -8 && addrs[1] == 256);
    OK(MPI_Type_get_envelope(types[0], &ni, &na, &nd, &comb));
    CHECK(comb == MPI_COMBINER_STRUCT);
    OK(MPI_Type_free(&types[0]));

    OK(MPI_Type_dup(MPI_FLOAT, &dup));
    OK(MPI_Type_get_envelope(dup, &ni, &na, &nd, &comb));
    CHECK(comb == MPI_COMBINER_DUP && ni == 0 && na == 0 && nd == 1);
    OK(MPI_Type_get_contents(dup, 0, 0, 1, ints, addrs, types));
    CHECK(types[0] == MPI_FLOAT);

    int sizes[2] = {10, 20}, subs[2] = {3, 4}, starts[2] = {5, 6};
    OK(MPI_Type_create_subarray(2, sizes, subs, starts, MPI_ORDER_C, MPI_INT, &sub));
    OK(MPI_Type_get_envelope(sub, &ni, &na, &nd, &comb));
    CHECK(comb == MPI_COMBINER_SUBARRAY && ni == 3 * 2 + 2 && nd == 1);
    OK(MPI_Type_get_contents(sub, 16, 0, 1, ints, addrs, types));
    int expect[8] = {2, 10, 20, 3, 4, 5, 6, MPI_ORDER_C};
    CHECK(memcmp(ints, expect, sizeof expect) == 0 && types[0] == MPI_INT);

    int ibl[2] = {1, 3}, idisp[2] = {4, 0};
    MPI_Datatype idx;
    OK(MPI_Type_indexed(2, ibl, idisp, MPI_SHORT, &idx));
    OK(MPI_Type_get_envelope(idx, &ni, &na, &nd, &comb));
    CHECK(comb == MPI_COMBINER_INDEXED && ni == 5 && na == 0 && nd == 1);
    OK(MPI_Type_get_contents(idx, 5, 0, 1, ints, addrs, types));
    CHECK(ints[0] == 2 && ints[1] == 1 && ints[2] == 3 && ints[3] == 4 && ints[4] == 0);

    MPI_Datatype *mine[6] = {&vec, &st, &res, &dup, &sub, &idx};
    for (int k = 0; k < 6; k++) OK(MPI_Type_free(mine[k]));
}

static void sizes_and_kinds(void) {
    MPI_Datatype t, t2;
    OK(MPI_Type_match_size(MPI_TYPECLASS_INTEGER, 4, &t));
    CHECK(t == MPI_INTEGER4);
    OK(MPI_Type_match_size(MPI_TYPECLASS_REAL, 8, &t));
    CHECK(t == MPI_REAL8);
    OK(MPI_Type_match_size(MPI_TYPECLASS_COMPLEX, 16, &t));
    CHECK(t == MPI_COMPLEX16);
    FAILS(MPI_ERR_ARG, MPI_Type_match_size(MPI_TYPECLASS_REAL, 3, &t));
    FAILS(MPI_ERR_ARG, MPI_Type_match_size(12345, 4, &t));

    /* One handle per kind, not freeable, decoded as the Fortran kind. */
    OK(MPI_Type_create_f90_integer(9, &t));
    OK(MPI_Type_create_f90_integer(9, &t2));
    CHECK(t == t2);
    int size, ni, na, nd, comb, ints[2];
    OK(MPI_Type_size(t, &size));
    CHECK(size == 4);
    OK(MPI_Type_get_envelope(t, &ni, &na, &nd, &comb));
    CHECK(comb == MPI_COMBINER_F90_INTEGER && ni == 1 && na == 0 && nd == 0);
    OK(MPI_Type_get_contents(t, 1, 0, 0, ints, NULL, NULL));
    CHECK(ints[0] == 9);
    FAILS(MPI_ERR_TYPE, MPI_Type_free(&t2));
    int v = 7, w = 0;
    OK(MPI_Sendrecv(&v, 1, t, 0, 5, &w, 1, t, 0, 5, MPI_COMM_SELF, MPI_STATUS_IGNORE));
    CHECK(w == 7);

    OK(MPI_Type_create_f90_real(15, MPI_UNDEFINED, &t));
    OK(MPI_Type_size(t, &size));
    CHECK(size == 8);
    OK(MPI_Type_get_contents(t, 2, 0, 0, ints, NULL, NULL));
    CHECK(ints[0] == 15 && ints[1] == MPI_UNDEFINED);
    OK(MPI_Type_create_f90_complex(MPI_UNDEFINED, 30, &t));
    OK(MPI_Type_size(t, &size));
    CHECK(size == 8);
    OK(MPI_Type_get_envelope(t, &ni, &na, &nd, &comb));
    CHECK(comb == MPI_COMBINER_F90_COMPLEX && ni == 2);
    FAILS(MPI_ERR_ARG, MPI_Type_create_f90_integer(40, &t));
    FAILS(MPI_ERR_ARG, MPI_Type_create_f90_real(40, MPI_UNDEFINED, &t));
    FAILS(MPI_ERR_ARG, MPI_Type_create_f90_real(MPI_UNDEFINED, MPI_UNDEFINED, &t));

    OK(MPI_Type_get_value_index(MPI_DOUBLE, MPI_INT, &t));
    CHECK(t == MPI_DOUBLE_INT);
    OK(MPI_Type_get_value_index(MPI_REAL, MPI_INTEGER, &t));
    CHECK(t == MPI_2REAL);
    OK(MPI_Type_get_value_index(MPI_FLOAT, MPI_FLOAT, &t));
    CHECK(t == MPI_DATATYPE_NULL);
}

static void external32(int rank, int size) {
    /* struct { int; double; short; } packs as 4 + 8 + 2 big-endian bytes. */
    struct rec {
        int i;
        double d;
        short s;
    } r[2] = {{1, 1.0, 0x1234}, {-2, -2.5, -1}};
    int bl[3] = {1, 1, 1};
    MPI_Aint disp[3] = {offsetof(struct rec, i), offsetof(struct rec, d), offsetof(struct rec, s)};
    MPI_Datatype types[3] = {MPI_INT, MPI_DOUBLE, MPI_SHORT}, rt;
    OK(MPI_Type_create_struct(3, bl, disp, types, &rt));
    OK(MPI_Type_commit(&rt));
    MPI_Aint need = 0;
    OK(MPI_Pack_external_size("external32", 2, rt, &need));
    CHECK(need == 28);
    unsigned char buf[64];
    MPI_Aint pos = 0;
    OK(MPI_Pack_external("external32", r, 2, rt, buf, sizeof buf, &pos));
    CHECK(pos == 28);
    const unsigned char want[28] = {0, 0, 0, 1, 0x3f, 0xf0, 0, 0, 0, 0, 0, 0, 0x12, 0x34,
                                    0xff, 0xff, 0xff, 0xfe, 0xc0, 0x04, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    CHECK(memcmp(buf, want, sizeof want) == 0);
    struct rec back[2];
    memset(back, 0, sizeof back);
    pos = 0;
    OK(MPI_Unpack_external("external32", buf, 28, &pos, back, 2, rt));
    CHECK(pos == 28);
    for (int k = 0; k < 2; k++) CHECK(back[k].i == r[k].i && back[k].d == r[k].d && back[k].s == r[k].s);
    /* Too little room or data; any other representation. */
    pos = 0;
    FAILS(MPI_ERR_TRUNCATE, MPI_Pack_external("external32", r, 2, rt, buf, 27, &pos));
    pos = 0;
    FAILS(MPI_ERR_TRUNCATE, MPI_Unpack_external("external32", buf, 14, &pos, back, 2, rt));
    FAILS(MPI_ERR_ARG, MPI_Pack_external_size("native", 1, rt, &need));
    pos = 0;
    FAILS(MPI_ERR_ARG, MPI_Pack_external("internal", r, 1, rt, buf, sizeof buf, &pos));

    /* Large-count forms: a column of doubles, appended after the records. */
    double m[4][3];
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 3; j++) m[i][j] = value(rank, i, j);
    MPI_Datatype col;
    OK(MPI_Type_vector(4, 1, 3, MPI_DOUBLE, &col));
    OK(MPI_Type_commit(&col));
    MPI_Count csize = 0, cpos = 0;
    OK(MPI_Pack_external_size_c("external32", 1, col, &csize));
    CHECK(csize == 32);
    OK(MPI_Pack_external_c("external32", r, 1, rt, buf, sizeof buf, &cpos));
    OK(MPI_Pack_external_c("external32", &m[0][1], 1, col, buf, sizeof buf, &cpos));
    CHECK(cpos == 14 + 32);
    for (int i = 0; i < 4; i++) {
        double x = value(rank, i, 1);
        unsigned char be[8];
        unsigned long long u;
        memcpy(&u, &x, 8);
        for (int k = 0; k < 8; k++) be[k] = (unsigned char)(u >> (56 - 8 * k));
        CHECK(memcmp(buf + 14 + 8 * i, be, 8) == 0);
    }

    /* The packed bytes travel to the next rank, which unpacks them. */
    int next = (rank + 1) % size, prev = (rank + size - 1) % size;
    unsigned char in[64];
    OK(MPI_Sendrecv(buf, (int)cpos, MPI_BYTE, next, 9, in, sizeof in, MPI_BYTE, prev, 9,
                    MPI_COMM_WORLD, MPI_STATUS_IGNORE));
    struct rec one;
    double got[4][3];
    memset(got, 0, sizeof got);
    MPI_Count upos = 0;
    OK(MPI_Unpack_external_c("external32", in, cpos, &upos, &one, 1, rt));
    OK(MPI_Unpack_external_c("external32", in, cpos, &upos, &got[0][1], 1, col));
    CHECK(upos == cpos && one.i == 1 && one.d == 1.0 && one.s == 0x1234);
    for (int i = 0; i < 4; i++) CHECK(got[i][1] == value(prev, i, 1) && got[i][0] == 0 && got[i][2] == 0);
    OK(MPI_Type_free(&rt));
    OK(MPI_Type_free(&col));
}

int main(int argc, char **argv) {
    int rank, size;
    OK(MPI_Init(&argc, &argv));
    OK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    OK(MPI_Comm_size(MPI_COMM_WORLD, &size));
    check_rank = rank;
    OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    OK(MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN));

    halo(rank, size);
    darray(rank, size);
    large_count_constructors();
    envelopes_and_contents();
    sizes_and_kinds();
    external32(rank, size);

    OK(MPI_Barrier(MPI_COMM_WORLD));
    OK(MPI_Finalize());
    PASSED("types_more");
    return 0;
}
