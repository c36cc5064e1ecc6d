/* The C half of mixed.f90: handles and a status made in Fortran, converted
 * with the MPI_*_f2c/c2f family and used from C. */
#include <mpi.h>

/* Called from Fortran as c_side(comm, datatype, op, status, result). */
void c_side_(MPI_Fint *f_comm, MPI_Fint *f_type, MPI_Fint *f_op, MPI_Fint *f_status,
             MPI_Fint *result);
void c_side_(MPI_Fint *f_comm, MPI_Fint *f_type, MPI_Fint *f_op, MPI_Fint *f_status,
             MPI_Fint *result)
{
    MPI_Comm comm = MPI_Comm_f2c(*f_comm);
    MPI_Datatype type = MPI_Type_f2c(*f_type);
    MPI_Op op = MPI_Op_f2c(*f_op);
    MPI_Status status;
    MPI_Fint back[MPI_F_STATUS_SIZE];
    int rank, bad = 0, sum = 0;
    MPI_Status_f2c(f_status, &status);
    MPI_Comm_rank(comm, &rank);
    /* the Fortran side received tag 5 from itself */
    if (status.MPI_SOURCE != rank || status.MPI_TAG != 5)
        bad |= 1;
    MPI_Status_c2f(&status, back);
    for (int i = 0; i < MPI_F_STATUS_SIZE; i++)
        if (back[i] != f_status[i])
            bad |= 2;
    if (MPI_Comm_c2f(comm) != *f_comm || MPI_Type_c2f(type) != *f_type ||
        MPI_Op_c2f(op) != *f_op)
        bad |= 4;
    MPI_Allreduce(&rank, &sum, 1, type, op, comm);
    *result = bad ? -bad : sum;
}

/* is_ignore = 1 when the Fortran status argument was MPI_STATUS_IGNORE. */
void c_is_status_ignore_(MPI_Fint *f_status, MPI_Fint *is_ignore);
void c_is_status_ignore_(MPI_Fint *f_status, MPI_Fint *is_ignore)
{
    *is_ignore = f_status == MPI_F_STATUS_IGNORE;
}
