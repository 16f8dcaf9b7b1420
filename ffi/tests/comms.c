/* Communicators and groups on 5+ ranks (more than cores): dup, split,
 * split_type, create, compare, names, error handler inheritance, the
 * group calls, free; traffic on one communicator never matches another's. */
#include "check.h"
#include <string.h>

static int size;

static void ring(MPI_Comm c, int tag) {
    int r, n, got = -1;
    OK(MPI_Comm_rank(c, &r));
    OK(MPI_Comm_size(c, &n));
    OK(MPI_Sendrecv(&r, 1, MPI_INT, (r + 1) % n, tag, &got, 1, MPI_INT, (r + n - 1) % n, tag, c, MPI_STATUS_IGNORE));
    CHECK(got == (r + n - 1) % n);
}

int main(int argc, char **argv) {
    int result, r, n, flag, len;
    char name[MPI_MAX_OBJECT_NAME];
    OK(MPI_Init(&argc, &argv));
    OK(MPI_Comm_rank(MPI_COMM_WORLD, &check_rank));
    OK(MPI_Comm_size(MPI_COMM_WORLD, &size));
    CHECK(size >= 5);

    /* Self. */
    OK(MPI_Comm_rank(MPI_COMM_SELF, &r));
    OK(MPI_Comm_size(MPI_COMM_SELF, &n));
    CHECK(r == 0 && n == 1);
    ring(MPI_COMM_SELF, 1);

    /* Dup: same group, separate traffic, inherited error handler. */
    OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    MPI_Comm dup;
    OK(MPI_Comm_dup(MPI_COMM_WORLD, &dup));
    MPI_Errhandler eh;
    OK(MPI_Comm_get_errhandler(dup, &eh));
    CHECK(eh == MPI_ERRORS_RETURN);
    OK(MPI_Comm_compare(MPI_COMM_WORLD, dup, &result));
    CHECK(result == MPI_CONGRUENT);
    OK(MPI_Comm_compare(dup, dup, &result));
    CHECK(result == MPI_IDENT);
    OK(MPI_Comm_rank(dup, &r));
    CHECK(r == check_rank);
    int me = check_rank;
    OK(MPI_Send(&me, 1, MPI_INT, check_rank, 9, dup));
    OK(MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, MPI_STATUS_IGNORE));
    CHECK(!flag);
    OK(MPI_Recv(&r, 1, MPI_INT, MPI_ANY_SOURCE, 9, dup, MPI_STATUS_IGNORE));
    CHECK(r == check_rank);
    ring(dup, 2);

    /* Names. */
    OK(MPI_Comm_get_name(MPI_COMM_WORLD, name, &len));
    CHECK(strcmp(name, "MPI_COMM_WORLD") == 0 && len == 14);
    OK(MPI_Comm_get_name(dup, name, &len));
    CHECK(len == 0 && name[0] == 0);
    OK(MPI_Comm_set_name(dup, "my duplicate"));
    OK(MPI_Comm_get_name(dup, name, &len));
    CHECK(strcmp(name, "my duplicate") == 0 && len == 12);
    OK(MPI_Comm_get_name(MPI_COMM_SELF, name, &len));
    CHECK(strcmp(name, "MPI_COMM_SELF") == 0 && len == 13);
    /* A name too long is cut to MPI_MAX_OBJECT_NAME - 1 bytes. */
    char long_name[2 * MPI_MAX_OBJECT_NAME];
    memset(long_name, 'x', sizeof long_name - 1);
    long_name[sizeof long_name - 1] = 0;
    OK(MPI_Comm_set_name(dup, long_name));
    OK(MPI_Comm_get_name(dup, name, &len));
    CHECK(len == MPI_MAX_OBJECT_NAME - 1 && strlen(name) == MPI_MAX_OBJECT_NAME - 1);

    /* Split by parity, reversed order by key. */
    MPI_Comm half;
    OK(MPI_Comm_split(MPI_COMM_WORLD, check_rank % 2, -check_rank, &half));
    OK(MPI_Comm_rank(half, &r));
    OK(MPI_Comm_size(half, &n));
    int members = (size + 1 - check_rank % 2) / 2;
    CHECK(n == members);
    /* Highest world rank of my parity is rank 0 in half. */
    int top = (size - 1) - ((size - 1 - check_rank % 2) % 2);
    CHECK(r == (top - check_rank) / 2);
    OK(MPI_Comm_compare(MPI_COMM_WORLD, half, &result));
    CHECK(result == MPI_UNEQUAL);
    ring(half, 3);

    /* MPI_UNDEFINED gets MPI_COMM_NULL. */
    MPI_Comm some;
    OK(MPI_Comm_split(MPI_COMM_WORLD, check_rank < 2 ? 0 : MPI_UNDEFINED, 0, &some));
    if (check_rank < 2) {
        OK(MPI_Comm_size(some, &n));
        CHECK(n == 2);
        ring(some, 4);
        OK(MPI_Comm_free(&some));
    }
    CHECK(some == MPI_COMM_NULL);

    /* Split types: shared memory is the whole node. */
    MPI_Comm node, hw;
    OK(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, check_rank, MPI_INFO_NULL, &node));
    OK(MPI_Comm_compare(MPI_COMM_WORLD, node, &result));
    CHECK(result == MPI_CONGRUENT);
    OK(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_HW_GUIDED, 0, MPI_INFO_NULL, &hw));
    CHECK(hw == MPI_COMM_NULL);
    for (int i = 0; i < size; i++) {
        int nr;
        OK(HMPI_Comm_node_rank(node, i, &nr));
        CHECK(nr == i);
    }
    OK(HMPI_Comm_node_rank(half, 0, &r));
    CHECK(r == top);
    OK(HMPI_Comm_node_rank(half, MPI_PROC_NULL, &r));
    CHECK(r == MPI_UNDEFINED);

    /* Groups. */
    MPI_Group world_g, half_g, even, odd, low, u, x, d, g;
    OK(MPI_Comm_group(MPI_COMM_WORLD, &world_g));
    OK(MPI_Comm_group(half, &half_g));
    OK(MPI_Group_size(world_g, &n));
    OK(MPI_Group_rank(world_g, &r));
    CHECK(n == size && r == check_rank);
    int ranges[1][3] = {{0, size - 1, 2}};
    OK(MPI_Group_range_incl(world_g, 1, ranges, &even));
    OK(MPI_Group_range_excl(world_g, 1, ranges, &odd));
    int three[3] = {0, 1, 2};
    OK(MPI_Group_incl(world_g, 3, three, &low));
    OK(MPI_Group_size(even, &n));
    CHECK(n == (size + 1) / 2);
    OK(MPI_Group_rank(odd, &r));
    CHECK(r == (check_rank % 2 ? check_rank / 2 : MPI_UNDEFINED));
    OK(MPI_Group_union(even, low, &u));     /* 0,2,4,..., then 1 */
    OK(MPI_Group_intersection(even, low, &x)); /* 0, 2 */
    OK(MPI_Group_difference(low, even, &d));   /* 1 */
    OK(MPI_Group_size(u, &n));
    CHECK(n == (size + 1) / 2 + 1);
    OK(MPI_Group_size(x, &n));
    CHECK(n == 2);
    int q[2] = {0, 1}, t[2];
    OK(MPI_Group_translate_ranks(x, 2, q, world_g, t));
    CHECK(t[0] == 0 && t[1] == 2);
    OK(MPI_Group_translate_ranks(d, 1, q, world_g, t));
    CHECK(t[0] == 1);
    int w[3] = {1, 2, MPI_PROC_NULL};
    int tw[3];
    OK(MPI_Group_translate_ranks(world_g, 3, w, even, tw));
    CHECK(tw[0] == MPI_UNDEFINED && tw[1] == 1 && tw[2] == MPI_PROC_NULL);
    OK(MPI_Group_compare(world_g, world_g, &result));
    CHECK(result == MPI_IDENT);
    int rev[64];
    for (int i = 0; i < size; i++) rev[i] = size - 1 - i;
    OK(MPI_Group_incl(world_g, size, rev, &g));
    OK(MPI_Group_compare(world_g, g, &result));
    CHECK(result == MPI_SIMILAR);
    OK(MPI_Group_compare(even, low, &result));
    CHECK(result == MPI_UNEQUAL);
    OK(MPI_Group_excl(world_g, size, rev, &g));
    CHECK(g == MPI_GROUP_EMPTY);
    OK(MPI_Group_size(MPI_GROUP_EMPTY, &n));
    CHECK(n == 0);

    /* A communicator of the even ranks. */
    MPI_Comm evens;
    OK(MPI_Comm_create(MPI_COMM_WORLD, even, &evens));
    if (check_rank % 2 == 0) {
        OK(MPI_Comm_rank(evens, &r));
        CHECK(r == check_rank / 2);
        ring(evens, 5);
        MPI_Group eg;
        OK(MPI_Comm_group(evens, &eg));
        OK(MPI_Group_compare(eg, even, &result));
        CHECK(result == MPI_IDENT);
        OK(MPI_Group_free(&eg));
        OK(MPI_Comm_free(&evens));
    } else {
        CHECK(evens == MPI_COMM_NULL);
    }

    /* Disjoint groups (MPI 2.2): each process passes its own group, the
     * evens or the odds but rank 1, which passes an empty one; each group
     * becomes a communicator of its own. */
    MPI_Comm part;
    MPI_Group mine = check_rank % 2 == 0 ? even : odd;
    if (check_rank == 1) mine = MPI_GROUP_EMPTY;
    else if (check_rank % 2 == 1) {
        int one = 0; /* rank 1 is rank 0 of odd */
        OK(MPI_Group_excl(odd, 1, &one, &mine));
    }
    OK(MPI_Comm_create(MPI_COMM_WORLD, mine, &part));
    if (check_rank == 1) {
        CHECK(part == MPI_COMM_NULL);
    } else {
        int want_n = check_rank % 2 == 0 ? (size + 1) / 2 : size / 2 - 1;
        int want_r = check_rank % 2 == 0 ? check_rank / 2 : check_rank / 2 - 1;
        OK(MPI_Comm_size(part, &n));
        OK(MPI_Comm_rank(part, &r));
        CHECK(n == want_n && r == want_r);
        if (n > 1) ring(part, 8);
        MPI_Group pg;
        OK(MPI_Comm_group(part, &pg));
        OK(MPI_Group_compare(pg, mine, &result));
        CHECK(result == MPI_IDENT);
        OK(MPI_Group_free(&pg));
        OK(MPI_Comm_free(&part));
    }
    if (check_rank % 2 == 1 && check_rank != 1) OK(MPI_Group_free(&mine));

    /* MPI_COMM_NULL has a name (MPI 4.1). */
    OK(MPI_Comm_get_name(MPI_COMM_NULL, name, &len));
    CHECK(strcmp(name, "MPI_COMM_NULL") == 0 && len == 13);

    MPI_Group all[] = {world_g, half_g, even, odd, low, u, x, d};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
        OK(MPI_Group_free(&all[i]));
        CHECK(all[i] == MPI_GROUP_NULL);
    }
    OK(MPI_Barrier(dup));
    OK(MPI_Comm_free(&dup));
    OK(MPI_Comm_free(&half));
    OK(MPI_Comm_free(&node));
    CHECK(dup == MPI_COMM_NULL && half == MPI_COMM_NULL);

    /* Environment queries. */
    int provided;
    OK(MPI_Query_thread(&provided));
    CHECK(provided == MPI_THREAD_MULTIPLE);
    OK(MPI_Is_thread_main(&flag));
    CHECK(flag);
    char host[MPI_MAX_PROCESSOR_NAME];
    OK(MPI_Get_processor_name(host, &len));
    CHECK(len > 0 && (size_t)len == strlen(host));
    double t0 = MPI_Wtime(), t1 = MPI_Wtime();
    CHECK(t1 >= t0 && MPI_Wtick() > 0 && MPI_Wtick() < 1e-3);

    OK(MPI_Barrier(MPI_COMM_WORLD));
    OK(MPI_Finalize());
    PASSED("comms");
    return 0;
}
