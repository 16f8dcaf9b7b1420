/* The header's values are the MPI 5.0 standard ABI's (checked at compile
 * time against the numbers of the standard's mpi.h), and the library
 * agrees with them at run time. */
#include "check.h"
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <wchar.h>

#define HANDLE(h) ((uintptr_t)(h))

_Static_assert(sizeof(MPI_Status) == 32, "MPI_Status is 8 ints");
_Static_assert(offsetof(MPI_Status, MPI_SOURCE) == 0, "MPI_SOURCE first");
_Static_assert(offsetof(MPI_Status, MPI_TAG) == 4, "MPI_TAG second");
_Static_assert(offsetof(MPI_Status, MPI_ERROR) == 8, "MPI_ERROR third");
_Static_assert(sizeof(MPI_Aint) == sizeof(intptr_t), "MPI_Aint is intptr_t");
_Static_assert(sizeof(MPI_Count) == 8 && sizeof(MPI_Offset) == 8, "64-bit counts");
_Static_assert(sizeof(MPI_Comm) == sizeof(void *), "handles are pointers");

_Static_assert(MPI_SUCCESS == 0 && MPI_ERR_BUFFER == 1 && MPI_ERR_COUNT == 2, "classes");
_Static_assert(MPI_ERR_TYPE == 3 && MPI_ERR_TAG == 4 && MPI_ERR_COMM == 5, "classes");
_Static_assert(MPI_ERR_RANK == 6 && MPI_ERR_REQUEST == 7 && MPI_ERR_GROUP == 9, "classes");
_Static_assert(MPI_ERR_ARG == 13 && MPI_ERR_TRUNCATE == 15 && MPI_ERR_OTHER == 16, "classes");
_Static_assert(MPI_ERR_INTERN == 17 && MPI_ERR_IN_STATUS == 19 && MPI_ERR_NO_MEM == 39, "classes");
_Static_assert(MPI_ERR_UNSUPPORTED_OPERATION == 55 && MPI_ERR_ERRHANDLER == 61, "classes");
_Static_assert(MPI_ERR_ABI == 62 && MPI_ERR_LASTCODE == 0x3fff, "classes");
_Static_assert(MPI_T_ERR_CANNOT_INIT == 1001 && MPI_T_ERR_NOT_SUPPORTED == 1004, "tool codes");
_Static_assert(MPI_T_ERR_PVAR_NO_ATOMIC == 1018, "tool codes");

_Static_assert(MPI_ANY_SOURCE == -1 && MPI_ANY_TAG == -2 && MPI_PROC_NULL == -3, "wildcards");
_Static_assert(MPI_ROOT == -4 && MPI_UNDEFINED == -32766, "sentinels");
_Static_assert(MPI_THREAD_SINGLE == 0 && MPI_THREAD_FUNNELED == 1024, "thread levels");
_Static_assert(MPI_THREAD_SERIALIZED == 2048 && MPI_THREAD_MULTIPLE == 4096, "thread levels");
_Static_assert(MPI_IDENT == 201 && MPI_CONGRUENT == 202 && MPI_SIMILAR == 203 && MPI_UNEQUAL == 204, "comparisons");
_Static_assert(MPI_COMM_TYPE_SHARED == 221, "split types");
_Static_assert(MPI_COMBINER_F90_REAL == 113 && MPI_COMBINER_F90_INTEGER == 115, "combiners");
_Static_assert(MPI_SEEK_CUR == 401 && MPI_SEEK_SET == 403, "seek");
_Static_assert(MPI_TAG_UB == 501 && MPI_APPNUM == 505 && MPI_UNIVERSE_SIZE == 507, "attribute keys");
_Static_assert(MPI_MAX_PROCESSOR_NAME == 256 && MPI_MAX_ERROR_STRING == 512, "string sizes");
_Static_assert(MPI_MAX_OBJECT_NAME == 128 && MPI_MAX_LIBRARY_VERSION_STRING == 8192, "string sizes");

int main(int argc, char **argv) {
    /* Predefined handles (pointer values, so checked at run time). */
    CHECK(HANDLE(MPI_COMM_NULL) == 0x100 && HANDLE(MPI_COMM_WORLD) == 0x101 && HANDLE(MPI_COMM_SELF) == 0x102);
    CHECK(HANDLE(MPI_GROUP_NULL) == 0x108 && HANDLE(MPI_GROUP_EMPTY) == 0x109);
    CHECK(HANDLE(MPI_REQUEST_NULL) == 0x180 && HANDLE(MPI_MESSAGE_NULL) == 0x128 && HANDLE(MPI_MESSAGE_NO_PROC) == 0x129);
    CHECK(HANDLE(MPI_ERRHANDLER_NULL) == 0x140 && HANDLE(MPI_ERRORS_ARE_FATAL) == 0x141);
    CHECK(HANDLE(MPI_ERRORS_ABORT) == 0x142 && HANDLE(MPI_ERRORS_RETURN) == 0x143);
    CHECK(HANDLE(MPI_INFO_NULL) == 0x130 && HANDLE(MPI_OP_NULL) == 0x20 && HANDLE(MPI_SUM) == 0x21);
    CHECK(HANDLE(MPI_DATATYPE_NULL) == 0x200 && HANDLE(MPI_INT) == 0x209 && HANDLE(MPI_DOUBLE) == 0x214);
    CHECK(HANDLE(MPI_CHAR) == 0x243 && HANDLE(MPI_BYTE) == 0x247 && HANDLE(MPI_UINT64_T) == 0x259);
    CHECK(HANDLE(MPI_LONG_LONG_INT) == HANDLE(MPI_LONG_LONG) && HANDLE(MPI_C_COMPLEX) == HANDLE(MPI_C_FLOAT_COMPLEX));

    /* Routines that work before MPI_Init. */
    int v, sv, flag;
    OK(MPI_Get_version(&v, &sv));
    CHECK(v == MPI_VERSION && sv == MPI_SUBVERSION && v == 5);
    OK(MPI_Abi_get_version(&v, &sv));
    CHECK(v == 1 && sv == 0);
    OK(MPI_Initialized(&flag));
    CHECK(!flag);
    char lib[MPI_MAX_LIBRARY_VERSION_STRING];
    int len;
    OK(MPI_Get_library_version(lib, &len));
    CHECK(len > 0 && (size_t)len == strlen(lib) && strstr(lib, "hmpi") != NULL);

    OK(MPI_Init(&argc, &argv));
    OK(MPI_Comm_rank(MPI_COMM_WORLD, &check_rank));
    OK(MPI_Initialized(&flag));
    CHECK(flag);

    /* Every predefined C type has its C size. */
    struct { MPI_Datatype t; size_t size; } types[] = {
        {MPI_CHAR, sizeof(char)}, {MPI_SIGNED_CHAR, sizeof(signed char)},
        {MPI_UNSIGNED_CHAR, sizeof(unsigned char)}, {MPI_BYTE, 1}, {MPI_PACKED, 1},
        {MPI_SHORT, sizeof(short)}, {MPI_UNSIGNED_SHORT, sizeof(unsigned short)},
        {MPI_INT, sizeof(int)}, {MPI_UNSIGNED, sizeof(unsigned)}, {MPI_LONG, sizeof(long)},
        {MPI_UNSIGNED_LONG, sizeof(unsigned long)}, {MPI_LONG_LONG, sizeof(long long)},
        {MPI_UNSIGNED_LONG_LONG, sizeof(unsigned long long)}, {MPI_FLOAT, sizeof(float)},
        {MPI_DOUBLE, sizeof(double)}, {MPI_LONG_DOUBLE, sizeof(long double)},
        {MPI_WCHAR, sizeof(wchar_t)}, {MPI_C_BOOL, sizeof(_Bool)},
        {MPI_INT8_T, 1}, {MPI_UINT8_T, 1}, {MPI_INT16_T, 2}, {MPI_UINT16_T, 2},
        {MPI_INT32_T, 4}, {MPI_UINT32_T, 4}, {MPI_INT64_T, 8}, {MPI_UINT64_T, 8},
        {MPI_AINT, sizeof(MPI_Aint)}, {MPI_OFFSET, sizeof(MPI_Offset)}, {MPI_COUNT, sizeof(MPI_Count)},
        {MPI_C_FLOAT_COMPLEX, 2 * sizeof(float)}, {MPI_C_DOUBLE_COMPLEX, 2 * sizeof(double)},
        {MPI_C_LONG_DOUBLE_COMPLEX, 2 * sizeof(long double)},
        {MPI_2INT, 2 * sizeof(int)}, {MPI_FLOAT_INT, sizeof(float) + sizeof(int)},
        {MPI_DOUBLE_INT, sizeof(double) + sizeof(int)}, {MPI_LONG_INT, sizeof(long) + sizeof(int)},
        {MPI_SHORT_INT, sizeof(short) + sizeof(int)},
        {MPI_LONG_DOUBLE_INT, sizeof(long double) + sizeof(int)},
    };
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
        int s;
        OK(MPI_Type_size(types[i].t, &s));
        CHECK((size_t)s == types[i].size);
    }
    /* Pair types have their C struct's extent. */
    struct di { double d; int i; };
    struct si { short s; int i; };
    struct ldi { long double d; int i; };
    MPI_Aint lb, ext;
    OK(MPI_Type_get_extent(MPI_DOUBLE_INT, &lb, &ext));
    CHECK(lb == 0 && (size_t)ext == sizeof(struct di));
    OK(MPI_Type_get_extent(MPI_SHORT_INT, &lb, &ext));
    CHECK(lb == 0 && (size_t)ext == sizeof(struct si));
    OK(MPI_Type_get_extent(MPI_LONG_DOUBLE_INT, &lb, &ext));
    CHECK(lb == 0 && (size_t)ext == sizeof(struct ldi));
    char name[MPI_MAX_OBJECT_NAME];
    OK(MPI_Type_get_name(MPI_UNSIGNED_LONG_LONG, name, &len));
    CHECK(strcmp(name, "MPI_UNSIGNED_LONG_LONG") == 0 && len == 22);

    /* Created handles are ints above the predefined range and round-trip. */
    MPI_Comm dup;
    OK(MPI_Comm_dup(MPI_COMM_WORLD, &dup));
    int i = MPI_Comm_toint(dup);
    CHECK(i >= 0x1000 && MPI_Comm_fromint(i) == dup);
    CHECK(MPI_Comm_toint(MPI_COMM_WORLD) == 0x101 && MPI_Comm_fromint(0x101) == MPI_COMM_WORLD);
    MPI_Datatype vec;
    OK(MPI_Type_vector(2, 1, 2, MPI_INT, &vec));
    CHECK(MPI_Type_toint(vec) >= 0x1000 && MPI_Type_fromint(MPI_Type_toint(vec)) == vec);
    CHECK(MPI_Request_fromint(MPI_Request_toint(MPI_REQUEST_NULL)) == MPI_REQUEST_NULL);
    CHECK(MPI_Win_toint(MPI_WIN_NULL) == 0x110 && MPI_Win_fromint(0x110) == MPI_WIN_NULL);
    CHECK(MPI_File_toint(MPI_FILE_NULL) == 0x118 && MPI_File_fromint(0x118) == MPI_FILE_NULL);
    CHECK(MPI_Session_toint(MPI_SESSION_NULL) == 0x120 && PMPI_Session_fromint(0x120) == MPI_SESSION_NULL);
    OK(MPI_Type_free(&vec));
    CHECK(vec == MPI_DATATYPE_NULL);
    OK(MPI_Comm_free(&dup));
    CHECK(dup == MPI_COMM_NULL);

    OK(MPI_Finalize());
    OK(MPI_Finalized(&flag));
    CHECK(flag);
    OK(MPI_Initialized(&flag));
    CHECK(flag);
    PASSED("abi_values");
    return 0;
}
