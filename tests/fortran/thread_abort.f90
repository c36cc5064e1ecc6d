! MPI_Init_thread, MPI_Query_thread and MPI_Is_thread_main from Fortran,
! then MPI_Abort with error code 7 from the last rank: the job must end
! with that failure, not hang or pass.
program thread_abort
  use mpi
  implicit none
  integer :: ierr, provided, queried, rank, nprocs
  logical :: main
  call MPI_Init_thread(MPI_THREAD_FUNNELED, provided, ierr)
  call MPI_Query_thread(queried, ierr)
  call MPI_Is_thread_main(main, ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
  call MPI_Comm_size(MPI_COMM_WORLD, nprocs, ierr)
  if (provided < MPI_THREAD_FUNNELED .or. queried /= provided .or. .not. main) then
    print '(A,I0,A,2I3,L2)', 'FAIL rank ', rank, ': thread level ', provided, queried, main
  else
    print '(A,I0)', 'THREAD-OK rank ', rank
  end if
  call MPI_Barrier(MPI_COMM_WORLD, ierr)
  if (rank == nprocs - 1) call MPI_Abort(MPI_COMM_WORLD, 7, ierr)
  ! the other ranks wait to be killed
  call MPI_Barrier(MPI_COMM_WORLD, ierr)
  print '(A)', 'FAIL: survived MPI_Abort'
  call MPI_Finalize(ierr)
end program thread_abort
