/* The C side of a job whose rank 0 is a Rust program (the c_programs
 * test binary): rank 0 sends 4 particles, every other one of an array of 8,
 * with a vector datatype it built from its #[derive(Equivalence)] struct;
 * this rank receives them with its own MPI description of the same layout,
 * changes them and sends them back the same way. */
#include "check.h"
#include <stdint.h>

struct particle {
    double pos[3];
    double mass;
    int64_t id;
};

int main(int argc, char **argv) {
    OK(MPI_Init(&argc, &argv));
    MPI_Comm_rank(MPI_COMM_WORLD, &check_rank);
    CHECK(check_rank == 1);

    int lens[3] = {3, 1, 1};
    MPI_Aint disp[3] = {offsetof(struct particle, pos), offsetof(struct particle, mass),
                        offsetof(struct particle, id)};
    MPI_Datatype types[3] = {MPI_DOUBLE, MPI_DOUBLE, MPI_INT64_T}, p, every_other;
    OK(MPI_Type_create_struct(3, lens, disp, types, &p));
    OK(MPI_Type_vector(4, 1, 2, p, &every_other));
    OK(MPI_Type_commit(&every_other));

    struct particle ps[8];
    for (int i = 0; i < 8; i++) ps[i] = (struct particle){{-1, -1, -1}, -1, -1};
    MPI_Status st;
    OK(MPI_Recv(ps, 1, every_other, 0, 7, MPI_COMM_WORLD, &st));
    for (int i = 0; i < 8; i++) {
        if (i % 2 == 0) {
            CHECK(ps[i].pos[0] == i && ps[i].pos[1] == i * 0.5 && ps[i].pos[2] == -i);
            CHECK(ps[i].mass == 1.0 + i && ps[i].id == 1000 + i);
            ps[i].mass *= 2;
            ps[i].id += 1;
        } else {
            CHECK(ps[i].pos[0] == -1 && ps[i].mass == -1 && ps[i].id == -1);
        }
    }
    OK(MPI_Send(ps, 1, every_other, 0, 8, MPI_COMM_WORLD));
    OK(MPI_Type_free(&every_other));
    OK(MPI_Type_free(&p));
    PASSED("derived");
    return MPI_Finalize();
}
