//! `libhmpi`: the C interface of hmpi (the MPI subset, OPI, and `malloc`
//! on the node's shared heap).
