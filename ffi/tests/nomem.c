/* A program whose malloc used up its rank's arena (malloc returns NULL)
 * still gets answers from MPI: each call succeeds or fails with
 * MPI_ERR_NO_MEM, and none aborts, because the library's own bookkeeping
 * does not depend on room left in the arena. Run with a small arena
 * (HMPI_HEAP_PER_RANK). */
#include "check.h"
#include <string.h>

#define MAX_BLOCKS 200000

static void *blocks[MAX_BLOCKS];
static int nblocks;

/* Allocates until malloc says no, from large blocks down to small ones. */
static void exhaust(void) {
    for (size_t size = 1 << 20; size >= 16; size /= 2) {
        while (nblocks < MAX_BLOCKS) {
            void *p = malloc(size);
            if (p == NULL)
                break;
            memset(p, 1, size < 64 ? size : 64);
            blocks[nblocks++] = p;
        }
    }
    CHECK(nblocks < MAX_BLOCKS);
    CHECK(malloc(16) == NULL);
}

/* A call that must succeed or say it has no memory. */
#define OK_OR_NOMEM(call)                                                     \
    do {                                                                      \
        int rc_ = (call);                                                     \
        if (rc_ != MPI_SUCCESS && rc_ != MPI_ERR_NO_MEM) {                   \
            fprintf(stderr, "rank %d: %s:%d: %s returned %d\n", check_rank,   \
                    __FILE__, __LINE__, #call, rc_);                          \
            exit(3);                                                          \
        }                                                                     \
        calls += 1;                                                           \
        nomem += rc_ == MPI_ERR_NO_MEM;                                       \
    } while (0)

/* Rank 0 sends `count` of `type` at `buf` to rank 1, the two agreeing
 * through tiny messages (fast-box sized: no allocation) on whether each
 * side could start, so that a side that ran out of memory never leaves
 * the other waiting. */
static int calls, nomem;

static void transfer(void *buf, int count, MPI_Datatype type, int tag) {
    int peer = 1 - check_rank, rc, theirs;
    MPI_Request r = MPI_REQUEST_NULL;
    if (check_rank == 1) {
        rc = MPI_Irecv(buf, count, type, peer, tag, MPI_COMM_WORLD, &r);
        OK_OR_NOMEM(rc);
        OK(MPI_Send(&rc, 1, MPI_INT, peer, 100, MPI_COMM_WORLD));
        OK(MPI_Recv(&theirs, 1, MPI_INT, peer, 101, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        if (rc == MPI_SUCCESS) {
            if (theirs != MPI_SUCCESS)
                OK(MPI_Cancel(&r));
            OK_OR_NOMEM(MPI_Wait(&r, MPI_STATUS_IGNORE));
        }
    } else {
        OK(MPI_Recv(&theirs, 1, MPI_INT, peer, 100, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        rc = theirs;
        if (theirs == MPI_SUCCESS) {
            rc = MPI_Isend(buf, count, type, peer, tag, MPI_COMM_WORLD, &r);
            OK_OR_NOMEM(rc);
            if (rc == MPI_SUCCESS) {
                rc = MPI_Wait(&r, MPI_STATUS_IGNORE);
                OK_OR_NOMEM(rc);
            }
        }
        OK(MPI_Send(&rc, 1, MPI_INT, peer, 101, MPI_COMM_WORLD));
    }
}

int main(int argc, char **argv) {
    int size;
    OK(MPI_Init(&argc, &argv));
    OK(MPI_Comm_rank(MPI_COMM_WORLD, &check_rank));
    OK(MPI_Comm_size(MPI_COMM_WORLD, &size));
    CHECK(size == 2);
    OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    OK(MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN));
    /* Both ranks are ready before either fills its arena. */
    OK(MPI_Barrier(MPI_COMM_WORLD));
    exhaust();

    static int small[4], big[1 << 16];
    static int strided[3 << 16];
    for (int round = 0; round < 3; round++) {
        /* Point to point: small, large, non-contiguous. */
        small[0] = check_rank == 0 ? round : -1;
        transfer(small, 4, MPI_INT, 1);
        transfer(big, 1 << 16, MPI_INT, 2);
        MPI_Datatype vec;
        int rc = MPI_Type_vector(1 << 16, 1, 3, MPI_INT, &vec);
        OK_OR_NOMEM(rc);
        if (rc == MPI_SUCCESS) {
            OK_OR_NOMEM(MPI_Type_commit(&vec));
            transfer(strided, 1, vec, 3);
            OK(MPI_Type_free(&vec));
        }
        /* A communicator, and a collective on the world. */
        MPI_Comm dup;
        rc = MPI_Comm_dup(MPI_COMM_WORLD, &dup);
        OK_OR_NOMEM(rc);
        if (rc == MPI_SUCCESS)
            OK(MPI_Comm_free(&dup));
        int one = 1, sum = 0;
        rc = MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
        OK_OR_NOMEM(rc);
        if (rc == MPI_SUCCESS)
            CHECK(sum == 2);
    }
    printf("rank %d: %d calls with a full arena, %d said MPI_ERR_NO_MEM\n", check_rank, calls,
           nomem);
    for (int i = 0; i < nblocks; i++)
        free(blocks[i]);
    OK(MPI_Barrier(MPI_COMM_WORLD));
    OK(MPI_Finalize());
    PASSED("nomem");
    return 0;
}
