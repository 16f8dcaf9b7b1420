/*
 * opi.h -- ownership passing (OPI) for C programs on libhmpi.
 *
 * A buffer allocated with OPI_Alloc (or by malloc, which is the node's
 * shared heap under libhmpi) can be *given* to another rank: the receiver
 * *takes* the very same memory, nothing is copied, and the giver no longer
 * owns it. OPI_Give and OPI_Free set the giver's pointer to NULL. Gives and
 * takes match MPI sends and receives on the same communicator: a give
 * received by MPI_Recv is copied into the receive buffer, a send taken by
 * OPI_Take arrives in a fresh buffer.
 *
 * `ptr` is the address of the program's pointer variable, as MPI_Alloc_mem's
 * `baseptr`:  double *buf;  OPI_Alloc(&buf, n * sizeof *buf);
 *
 * Datatypes must be dense (no gaps: every predefined type except the
 * padded pairs, or a derived type without holes); `count` elements are
 * `count * size` bytes at the start of the buffer. A take accepts a
 * message of at most `count` elements (else MPI_ERR_TRUNCATE and *ptr is
 * NULL). Requests of OPI_Igive / OPI_Itake complete with MPI_Wait & co;
 * OPI_Itake stores the taken pointer in *ptr when it completes.
 */
#ifndef HMPI_OPI_H
#define HMPI_OPI_H

#include <stddef.h>

#include "mpi.h"

#if defined(__cplusplus)
extern "C" {
#endif

/* A buffer of `len` bytes from this rank's buffer pool (64-byte aligned). */
int OPI_Alloc(void *ptr, size_t len);
/* Returns a buffer to the pool; *ptr becomes NULL. */
int OPI_Free(void *ptr);
/* Gives the buffer to `dest`; *ptr becomes NULL. */
int OPI_Give(void *ptr, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm);
/* OPI_Give as a request (complete at once); *ptr becomes NULL. */
int OPI_Igive(void *ptr, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm, MPI_Request *request);
/* Takes a buffer from `source` (or MPI_ANY_SOURCE): *ptr is the received
 * buffer (NULL for MPI_PROC_NULL), to be freed with OPI_Free. */
int OPI_Take(void *ptr, int count, MPI_Datatype datatype, int source, int tag, MPI_Comm comm, MPI_Status *status);
/* OPI_Take as a request: *ptr is set when the request completes. */
int OPI_Itake(void *ptr, int count, MPI_Datatype datatype, int source, int tag, MPI_Comm comm, MPI_Request *request);

#if defined(__cplusplus)
}
#endif

#endif /* HMPI_OPI_H */
