/*
 * MPI_Pcontrol and PMPI_Pcontrol: int MPI_Pcontrol(const int level, ...).
 *
 * The only variadic routines of the MPI standard ABI. Stable Rust cannot
 * define a C-variadic function, so they are C, compiled into libhmpi (the
 * shared and the static library) by build.rs.
 *
 * MPI_Pcontrol tells a profiling library interposed on it how much to
 * profile; the MPI library itself, with no profiler attached, does nothing
 * and returns MPI_SUCCESS, as the standard specifies. As for every other
 * routine, MPI_Pcontrol calls PMPI_Pcontrol (the extra arguments mean
 * nothing without a profiler and are not passed on).
 */
#include <mpi.h>

int PMPI_Pcontrol(const int level, ...) {
    (void)level;
    return MPI_SUCCESS;
}

int MPI_Pcontrol(const int level, ...) {
    return PMPI_Pcontrol(level);
}
