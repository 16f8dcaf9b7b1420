/* The large-count packing forms: MPI_Pack_size_c, MPI_Pack_c and
 * MPI_Unpack_c agree with the int forms (a strided datatype packed
 * between ints), report too little room as MPI_ERR_TRUNCATE and a
 * position beyond the int range as MPI_ERR_COUNT. */
#include "check.h"
#include <string.h>

int main(int argc, char **argv) {
    int rank;
    OK(MPI_Init(&argc, &argv));
    OK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    check_rank = rank;

    MPI_Datatype every_other;
    OK(MPI_Type_vector(4, 1, 2, MPI_DOUBLE, &every_other));
    OK(MPI_Type_commit(&every_other));
    double src[8] = {1, -1, 2, -1, 3, -1, 4, -1};
    int head[2] = {rank, 42};

    MPI_Count need_ints = 0, need_doubles = 0;
    int need_int = 0;
    OK(MPI_Pack_size_c(2, MPI_INT, MPI_COMM_WORLD, &need_ints));
    OK(MPI_Pack_size_c(1, every_other, MPI_COMM_WORLD, &need_doubles));
    OK(MPI_Pack_size(1, every_other, MPI_COMM_WORLD, &need_int));
    CHECK(need_ints >= 2 * (MPI_Count)sizeof(int) && need_doubles == need_int);

    char packed[256];
    MPI_Count pos = 0;
    OK(MPI_Pack_c(head, 2, MPI_INT, packed, sizeof packed, &pos, MPI_COMM_WORLD));
    OK(MPI_Pack_c(src, 1, every_other, packed, sizeof packed, &pos, MPI_COMM_WORLD));
    CHECK(pos == need_ints + need_doubles);

    /* The int form reads what the large-count form wrote. */
    int ipos = 0, h2[2] = {0, 0};
    double dst[4] = {0, 0, 0, 0};
    OK(MPI_Unpack(packed, (int)pos, &ipos, h2, 2, MPI_INT, MPI_COMM_WORLD));
    OK(MPI_Unpack(packed, (int)pos, &ipos, dst, 4, MPI_DOUBLE, MPI_COMM_WORLD));
    CHECK(h2[0] == rank && h2[1] == 42);
    CHECK(dst[0] == 1 && dst[1] == 2 && dst[2] == 3 && dst[3] == 4);

    /* And the large-count unpack, into the strided layout. */
    double back[8];
    for (int i = 0; i < 8; i++)
        back[i] = -7;
    MPI_Count upos = need_ints;
    OK(MPI_Unpack_c(packed, pos, &upos, back, 1, every_other, MPI_COMM_WORLD));
    CHECK(upos == pos);
    for (int i = 0; i < 4; i++)
        CHECK(back[2 * i] == i + 1 && back[2 * i + 1] == -7);

    OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    pos = 0;
    FAILS(MPI_ERR_TRUNCATE, MPI_Pack_c(src, 1, every_other, packed, 8, &pos, MPI_COMM_WORLD));
    pos = (MPI_Count)1 << 40;
    FAILS(MPI_ERR_COUNT, MPI_Pack_c(src, 1, every_other, packed, sizeof packed, &pos, MPI_COMM_WORLD));
    FAILS(MPI_ERR_COUNT, MPI_Pack_size_c(-1, MPI_INT, MPI_COMM_WORLD, &need_ints));
    upos = 0;
    FAILS(MPI_ERR_TRUNCATE, MPI_Unpack_c(packed, 4, &upos, back, 1, every_other, MPI_COMM_WORLD));

    OK(MPI_Type_free(&every_other));
    PASSED("pack_c");
    OK(MPI_Finalize());
    return 0;
}
