// The header compiles as C++ (-Wall -Wextra -pedantic -Werror), links, and
// works: handles are distinct pointer types, constants are usable in C++,
// and opi.h's calls take the address of any pointer variable.
#include <mpi.h>
#include <opi.h>

#include <cstdio>
#include <cstring>

static_assert(sizeof(MPI_Status) == 32, "MPI_Status is 8 ints");
static_assert(MPI_ANY_SOURCE == -1 && MPI_ERR_TRUNCATE == 15, "standard ABI values");

int main(int argc, char **argv) {
    if (MPI_Init(&argc, &argv) != MPI_SUCCESS) return 1;
    int rank = -1, size = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    double x = 1.5 * rank;
    MPI_Status st;
    MPI_Sendrecv_replace(&x, 1, MPI_DOUBLE, rank, 3, rank, 3, MPI_COMM_WORLD, &st);
    int n = 0;
    MPI_Get_count(&st, MPI_DOUBLE, &n);
    char name[MPI_MAX_OBJECT_NAME];
    int len = 0;
    MPI_Comm_get_name(MPI_COMM_WORLD, name, &len);
    void *buf = nullptr;
    bool opi_ok = OPI_Alloc(&buf, 64) == MPI_SUCCESS && buf != nullptr && OPI_Free(&buf) == MPI_SUCCESS && buf == nullptr;
    bool ok = opi_ok && n == 1 && x == 1.5 * rank && st.MPI_SOURCE == rank && std::strcmp(name, "MPI_COMM_WORLD") == 0;
    MPI_Finalize();
    if (!ok) return 2;
    std::printf("rank %d: header_cxx passed\n", rank);
    return 0;
}
