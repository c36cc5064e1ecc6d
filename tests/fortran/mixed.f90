! Fortran and C in one program: a communicator split in Fortran, a status
! filled in Fortran, a user op made in Fortran, all handed to C (mixed_c.c),
! which converts them with MPI_*_f2c and reduces with them.
subroutine add_ints(invec, inoutvec, len, datatype)
  integer :: len, datatype, invec(len), inoutvec(len), i
  do i = 1, len
    inoutvec(i) = inoutvec(i) + invec(i)
  end do
end subroutine add_ints

program mixed
  use mpi
  implicit none
  external :: add_ints
  integer :: ierr, rank, nprocs, half, hrank, hsize, op, result, status(MPI_STATUS_SIZE), x
  integer :: ignored, not_ignored
  call MPI_Init(ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
  call MPI_Comm_size(MPI_COMM_WORLD, nprocs, ierr)
  call MPI_Comm_split(MPI_COMM_WORLD, mod(rank, 2), rank, half, ierr)
  call MPI_Comm_rank(half, hrank, ierr)
  call MPI_Comm_size(half, hsize, ierr)
  call MPI_Sendrecv(rank, 1, MPI_INTEGER, hrank, 5, x, 1, MPI_INTEGER, hrank, 5, half, &
                    status, ierr)
  call MPI_Op_create(add_ints, .true., op, ierr)
  call c_side(half, MPI_INTEGER, op, status, result)
  if (result /= hsize * (hsize - 1) / 2) then
    print '(A,I0,A,I0)', 'FAIL rank ', rank, ': C side returned ', result
  end if
  ! C tells MPI_STATUS_IGNORE by comparing with MPI_F_STATUS_IGNORE
  call c_is_status_ignore(MPI_STATUS_IGNORE, ignored)
  call c_is_status_ignore(status, not_ignored)
  if (ignored /= 1 .or. not_ignored /= 0) then
    print '(A,I0,A,2I2)', 'FAIL rank ', rank, ': MPI_F_STATUS_IGNORE in C ', ignored, not_ignored
    result = -100
  end if
  call MPI_Allreduce(MPI_IN_PLACE, result, 1, MPI_INTEGER, MPI_MIN, MPI_COMM_WORLD, ierr)
  if (rank == 0 .and. result >= 0) print '(A)', 'OK'
  call MPI_Op_free(op, ierr)
  call MPI_Comm_free(half, ierr)
  call MPI_Finalize(ierr)
end program mixed
