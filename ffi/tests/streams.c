/* Many threads per rank in C: communicator hints through the info keys
 * (MPI_Comm_dup_with_info, MPI_Comm_set_info, MPI_Comm_get_info reporting
 * what is in effect, wildcards the hints rule out refused), four threads on
 * a tag-bit communicator and on one that allows overtaking (receives from
 * ANY_SOURCE find the messages on every VCI), and MPICH's explicit streams: three threads per
 * rank, each on a stream communicator of its own, ping-ponging at once.
 * Run with HMPI_VCIS=4 (streams) and HMPI_VCIS=1 (no stream to reserve). */
#include "check.h"
#include <pthread.h>
#include <string.h>

enum { THREADS = 4, STREAMS = 3, ROUNDS = 500 };

struct job {
    MPI_Comm comm;
    int tag;
    int any_source;
    int failed;
};

static void *pingpong(void *arg) {
    struct job *j = arg;
    int peer = 1 - check_rank;
    for (int i = 0; i < ROUNDS; i++) {
        long v = (long)j->tag * 100000 + i, got = -1;
        int src = j->any_source ? MPI_ANY_SOURCE : peer;
        MPI_Status st;
        if ((i + check_rank) % 2 == 0) {
            if (MPI_Send(&v, 1, MPI_LONG, peer, j->tag, j->comm) != MPI_SUCCESS) j->failed = 1;
        } else {
            if (MPI_Recv(&got, 1, MPI_LONG, src, j->tag, j->comm, &st) != MPI_SUCCESS) j->failed = 1;
            if (got != v || st.MPI_SOURCE != peer || st.MPI_TAG != j->tag) j->failed = 1;
        }
    }
    return NULL;
}

static void run(struct job *jobs, int n) {
    pthread_t th[THREADS];
    for (int i = 0; i < n; i++) {
        jobs[i].failed = 0;
        CHECK(pthread_create(&th[i], NULL, pingpong, &jobs[i]) == 0);
    }
    for (int i = 0; i < n; i++) {
        CHECK(pthread_join(th[i], NULL) == 0);
        CHECK(!jobs[i].failed);
    }
}

static int info_is(MPI_Info info, const char *key, const char *want) {
    char buf[64];
    int len = sizeof buf, flag = 0;
    OK(MPI_Info_get_string(info, key, &len, buf, &flag));
    return flag && strcmp(buf, want) == 0;
}

int main(int argc, char **argv) {
    int provided, size;
    OK(MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided));
    CHECK(provided == MPI_THREAD_MULTIPLE);
    OK(MPI_Comm_rank(MPI_COMM_WORLD, &check_rank));
    OK(MPI_Comm_size(MPI_COMM_WORLD, &size));
    CHECK(size == 2);
    OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    /* The stream routines have no communicator: MPI_COMM_SELF's handler. */
    OK(MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN));
    const char *vcis_var = getenv("HMPI_VCIS");
    int vcis = vcis_var ? atoi(vcis_var) : 1;

    /* Hints: no ANY_SOURCE, thread index in tag bits 0-1 (sender) and 2-3
     * (receiver). */
    MPI_Info info, used;
    OK(MPI_Info_create(&info));
    OK(MPI_Info_set(info, "mpi_assert_no_any_source", "TRUE"));
    OK(MPI_Info_set(info, "hmpi_vci_tag_bits_send", "0:2"));
    OK(MPI_Info_set(info, "hmpi_vci_tag_bits_recv", "2:2"));
    MPI_Comm hinted;
    OK(MPI_Comm_dup_with_info(MPI_COMM_WORLD, info, &hinted));
    OK(MPI_Comm_get_info(hinted, &used));
    CHECK(info_is(used, "mpi_assert_no_any_source", "true"));
    CHECK(info_is(used, "hmpi_vci_tag_bits_recv", "2:2"));
    OK(MPI_Info_free(&used));
    long x = 0;
    FAILS(MPI_ERR_ARG, MPI_Recv(&x, 1, MPI_LONG, MPI_ANY_SOURCE, 0, hinted, MPI_STATUS_IGNORE));
    int flag = 1;
    FAILS(MPI_ERR_ARG, MPI_Iprobe(1 - check_rank, MPI_ANY_TAG, hinted, &flag, MPI_STATUS_IGNORE));
    struct job jobs[THREADS];
    for (int i = 0; i < THREADS; i++) {
        jobs[i].comm = hinted;
        jobs[i].tag = i | i << 2;
        jobs[i].any_source = 0;
    }
    run(jobs, THREADS);

    /* A malformed value changes nothing; a new hint on a live one. */
    MPI_Info bad;
    OK(MPI_Info_create(&bad));
    OK(MPI_Info_set(bad, "hmpi_vci_tag_bits_send", "29:4"));
    FAILS(MPI_ERR_INFO_VALUE, MPI_Comm_set_info(hinted, bad));
    MPI_Comm other;
    FAILS(MPI_ERR_INFO_VALUE, MPI_Comm_dup_with_info(MPI_COMM_WORLD, bad, &other));
    OK(MPI_Info_free(&bad));
    MPI_Comm tagged;
    OK(MPI_Comm_dup(MPI_COMM_WORLD, &tagged));
    MPI_Info t;
    OK(MPI_Info_create(&t));
    OK(MPI_Info_set(t, "mpi_assert_no_any_tag", "true"));
    OK(MPI_Comm_set_info(tagged, t));
    OK(MPI_Info_free(&t));
    FAILS(MPI_ERR_ARG, MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, tagged, &flag, MPI_STATUS_IGNORE));
    OK(MPI_Iprobe(MPI_ANY_SOURCE, 5, tagged, &flag, MPI_STATUS_IGNORE));
    CHECK(!flag);
    OK(MPI_Comm_free(&tagged));
    OK(MPI_Comm_free(&hinted));
    OK(MPI_Info_free(&info));

    /* Overtaking allowed: each thread sends on its own VCI, and receives
     * (from ANY_SOURCE) look on every VCI. Then a receive posted before a
     * synchronous send towards each other, with both wildcards. */
    MPI_Comm loose;
    OK(MPI_Comm_dup(MPI_COMM_WORLD, &loose));
    OK(MPI_Info_create(&t));
    OK(MPI_Info_set(t, "mpi_assert_allow_overtaking", "true"));
    OK(MPI_Info_set(t, "mpi_assert_exact_length", "true"));
    OK(MPI_Comm_set_info(loose, t));
    OK(MPI_Info_free(&t));
    OK(MPI_Comm_get_info(loose, &used));
    CHECK(info_is(used, "mpi_assert_allow_overtaking", "true"));
    CHECK(info_is(used, "mpi_assert_exact_length", "true"));
    OK(MPI_Info_free(&used));
    for (int i = 0; i < THREADS; i++) {
        jobs[i].comm = loose;
        jobs[i].tag = 30 + i;
        jobs[i].any_source = 1;
    }
    run(jobs, THREADS);
    long out = 40 + check_rank, in = -1;
    MPI_Request rq;
    MPI_Status st;
    OK(MPI_Irecv(&in, 1, MPI_LONG, MPI_ANY_SOURCE, MPI_ANY_TAG, loose, &rq));
    OK(MPI_Ssend(&out, 1, MPI_LONG, 1 - check_rank, 9, loose));
    OK(MPI_Wait(&rq, &st));
    CHECK(in == 40 + (1 - check_rank) && st.MPI_SOURCE == 1 - check_rank && st.MPI_TAG == 9);
    OK(MPI_Comm_free(&loose));

    /* Streams. */
    MPIX_Stream s[STREAMS];
    MPI_Comm sc[STREAMS];
    if (vcis >= STREAMS + 1) {
        for (int i = 0; i < STREAMS; i++) OK(MPIX_Stream_create(MPI_INFO_NULL, &s[i]));
        MPIX_Stream extra;
        FAILS(MPI_ERR_COMM, MPIX_Stream_create(MPI_INFO_NULL, &extra));
        for (int i = 0; i < STREAMS; i++) {
            OK(MPIX_Stream_comm_create(MPI_COMM_WORLD, s[i], &sc[i]));
            jobs[i].comm = sc[i];
            jobs[i].tag = 20 + i;
            jobs[i].any_source = 1;
        }
        run(jobs, STREAMS);
        for (int i = 0; i < STREAMS; i++) {
            OK(MPI_Comm_free(&sc[i]));
            OK(MPIX_Stream_free(&s[i]));
            CHECK(s[i] == MPIX_STREAM_NULL);
        }
        FAILS(MPI_ERR_ARG, MPIX_Stream_free(&s[0]));
    } else {
        FAILS(MPI_ERR_COMM, MPIX_Stream_create(MPI_INFO_NULL, &s[0]));
    }
    /* Without a stream: a member takes part on its default VCI. */
    MPI_Comm plain;
    OK(MPIX_Stream_comm_create(MPI_COMM_WORLD, MPIX_STREAM_NULL, &plain));
    jobs[0].comm = plain;
    jobs[0].tag = 30;
    jobs[0].any_source = 1;
    run(jobs, 1);
    OK(MPI_Comm_free(&plain));
    MPI_Info gpu;
    OK(MPI_Info_create(&gpu));
    OK(MPI_Info_set(gpu, "type", "cudaStream_t"));
    FAILS(MPI_ERR_INFO_VALUE, MPIX_Stream_create(gpu, &s[0]));
    OK(MPI_Info_free(&gpu));

    OK(MPI_Barrier(MPI_COMM_WORLD));
    PASSED("streams");
    return MPI_Finalize();
}
