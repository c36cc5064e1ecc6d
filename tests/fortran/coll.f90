! Collectives through `use mpi`: every blocking collective, MPI_IN_PLACE, the
! nonblocking forms, a user-defined operation written in Fortran (called from
! the C side) and MPI_Reduce_local.  Rank 0 prints OK when all checks passed.
module coll_ops
  implicit none
contains
  ! (a, b) pairs combined as a + b and max(a, b): not a predefined operation.
  subroutine sum_and_max(invec, inoutvec, len, datatype)
    integer, intent(in) :: len, datatype
    integer, intent(in) :: invec(2, len)
    integer, intent(inout) :: inoutvec(2, len)
    integer :: i
    do i = 1, len
      inoutvec(1, i) = inoutvec(1, i) + invec(1, i)
      inoutvec(2, i) = max(inoutvec(2, i), invec(2, i))
    end do
  end subroutine sum_and_max
end module coll_ops

program coll
  use mpi
  use coll_ops
  implicit none
  integer :: ierr, rank, nprocs, nbad, total, root, i, j, n
  integer :: ival, isum, op, pairtype, req, reqs(3)
  integer :: pair(2), pairs(2)
  integer, allocatable :: sendv(:), recvv(:), counts(:), displs(:), expect(:)
  double precision :: dval, dsum, darr(3)
  nbad = 0
  call MPI_Init(ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
  call MPI_Comm_size(MPI_COMM_WORLD, nprocs, ierr)
  n = nprocs
  allocate(sendv(n * 2), recvv(n * 2), counts(n), displs(n), expect(n * 2))

  call MPI_Barrier(MPI_COMM_WORLD, ierr)
  do root = 0, n - 1
    ival = -1
    if (rank == root) ival = 42 + root
    call MPI_Bcast(ival, 1, MPI_INTEGER, root, MPI_COMM_WORLD, ierr)
    call check(ival == 42 + root, 'bcast')
    call MPI_Reduce(rank + 1, isum, 1, MPI_INTEGER, MPI_SUM, root, MPI_COMM_WORLD, ierr)
    if (rank == root) call check(isum == n * (n + 1) / 2, 'reduce sum')
  end do
  dval = rank + 0.5d0
  call MPI_Allreduce(dval, dsum, 1, MPI_DOUBLE_PRECISION, MPI_MAX, MPI_COMM_WORLD, ierr)
  call check(dsum == n - 0.5d0, 'allreduce max double')
  darr = [1d0, dble(rank), -dble(rank)]
  call MPI_Allreduce(MPI_IN_PLACE, darr, 3, MPI_DOUBLE_PRECISION, MPI_SUM, MPI_COMM_WORLD, ierr)
  call check(all(darr == [dble(n), dble(n * (n - 1) / 2), -dble(n * (n - 1) / 2)]), &
             'allreduce in place')
  ival = rank
  if (rank == 0) then
    call MPI_Reduce(MPI_IN_PLACE, ival, 1, MPI_INTEGER, MPI_SUM, 0, MPI_COMM_WORLD, ierr)
    call check(ival == n * (n - 1) / 2, 'reduce in place at root')
  else
    call MPI_Reduce(ival, ival, 1, MPI_INTEGER, MPI_SUM, 0, MPI_COMM_WORLD, ierr)
  end if

  ! gather / scatter / allgather(v) / alltoall
  call MPI_Gather(rank * 3, 1, MPI_INTEGER, recvv, 1, MPI_INTEGER, 0, MPI_COMM_WORLD, ierr)
  if (rank == 0) call check(all(recvv(1:n) == [(3 * i, i = 0, n - 1)]), 'gather')
  sendv(1:n) = [(10 * i, i = 0, n - 1)]
  call MPI_Scatter(sendv, 1, MPI_INTEGER, ival, 1, MPI_INTEGER, 0, MPI_COMM_WORLD, ierr)
  call check(ival == 10 * rank, 'scatter')
  call MPI_Allgather(rank, 1, MPI_INTEGER, recvv, 1, MPI_INTEGER, MPI_COMM_WORLD, ierr)
  call check(all(recvv(1:n) == [(i, i = 0, n - 1)]), 'allgather')
  recvv(rank + 1) = -rank
  call MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, recvv, 1, MPI_INTEGER, &
                     MPI_COMM_WORLD, ierr)
  call check(all(recvv(1:n) == [(-i, i = 0, n - 1)]), 'allgather in place')
  ! rank r contributes r+1 copies of r (counts 1..n, total n(n+1)/2 <= 2n for n <= 3)
  counts = [(min(i + 1, 2), i = 0, n - 1)]
  displs(1) = 0
  do i = 2, n
    displs(i) = displs(i - 1) + counts(i - 1)
  end do
  sendv(1:2) = rank
  call MPI_Allgatherv(sendv, counts(rank + 1), MPI_INTEGER, recvv, counts, displs, &
                      MPI_INTEGER, MPI_COMM_WORLD, ierr)
  do i = 0, n - 1
    call check(all(recvv(displs(i + 1) + 1:displs(i + 1) + counts(i + 1)) == i), 'allgatherv')
  end do
  sendv(1:n) = [(rank * 100 + i, i = 0, n - 1)]
  call MPI_Alltoall(sendv, 1, MPI_INTEGER, recvv, 1, MPI_INTEGER, MPI_COMM_WORLD, ierr)
  call check(all(recvv(1:n) == [(i * 100 + rank, i = 0, n - 1)]), 'alltoall')
  counts = 1
  displs = [(i, i = 0, n - 1)]
  call MPI_Alltoallv(sendv, counts, displs, MPI_INTEGER, recvv, counts, displs, MPI_INTEGER, &
                     MPI_COMM_WORLD, ierr)
  call check(all(recvv(1:n) == [(i * 100 + rank, i = 0, n - 1)]), 'alltoallv')
  call MPI_Gatherv(rank, 1, MPI_INTEGER, recvv, counts, displs, MPI_INTEGER, n - 1, &
                   MPI_COMM_WORLD, ierr)
  if (rank == n - 1) call check(all(recvv(1:n) == [(i, i = 0, n - 1)]), 'gatherv')
  call MPI_Scatterv(sendv, counts, displs, MPI_INTEGER, ival, 1, MPI_INTEGER, 0, &
                    MPI_COMM_WORLD, ierr)
  call check(ival == rank, 'scatterv')  ! rank 0's sendv(i+1) = i

  ! reduce_scatter_block, scan, exscan
  sendv(1:n) = [(rank + i, i = 0, n - 1)]
  call MPI_Reduce_scatter_block(sendv, ival, 1, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, ierr)
  call check(ival == n * (n - 1) / 2 + n * rank, 'reduce_scatter_block')
  counts = 1
  call MPI_Reduce_scatter(sendv, ival, counts, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, ierr)
  call check(ival == n * (n - 1) / 2 + n * rank, 'reduce_scatter')
  call MPI_Scan(rank + 1, isum, 1, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, ierr)
  call check(isum == (rank + 1) * (rank + 2) / 2, 'scan')
  isum = -7
  call MPI_Exscan(rank + 1, isum, 1, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, ierr)
  if (rank > 0) call check(isum == rank * (rank + 1) / 2, 'exscan')

  ! nonblocking collectives
  ival = -1
  if (rank == 0) ival = 7
  call MPI_Ibcast(ival, 1, MPI_INTEGER, 0, MPI_COMM_WORLD, reqs(1), ierr)
  call MPI_Iallreduce(rank, isum, 1, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, reqs(2), ierr)
  call MPI_Ibarrier(MPI_COMM_WORLD, reqs(3), ierr)
  call MPI_Waitall(3, reqs, MPI_STATUSES_IGNORE, ierr)
  call check(ival == 7 .and. isum == n * (n - 1) / 2, 'ibcast/iallreduce/ibarrier')
  call MPI_Iallgather(rank, 1, MPI_INTEGER, recvv, 1, MPI_INTEGER, MPI_COMM_WORLD, req, ierr)
  call MPI_Wait(req, MPI_STATUS_IGNORE, ierr)
  call check(all(recvv(1:n) == [(i, i = 0, n - 1)]), 'iallgather')
  call MPI_Ialltoall(sendv, 1, MPI_INTEGER, recvv, 1, MPI_INTEGER, MPI_COMM_WORLD, req, ierr)
  call MPI_Wait(req, MPI_STATUS_IGNORE, ierr)
  call check(all(recvv(1:n) == [(i + rank, i = 0, n - 1)]), 'ialltoall')
  call MPI_Ireduce(rank, isum, 1, MPI_INTEGER, MPI_MAX, 0, MPI_COMM_WORLD, req, ierr)
  call MPI_Wait(req, MPI_STATUS_IGNORE, ierr)
  if (rank == 0) call check(isum == n - 1, 'ireduce')
  call MPI_Iscan(1, isum, 1, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, req, ierr)
  call MPI_Wait(req, MPI_STATUS_IGNORE, ierr)
  call check(isum == rank + 1, 'iscan')

  ! a Fortran user operation on a derived type (2 INTEGERs), not commutative-flagged
  call MPI_Type_contiguous(2, MPI_INTEGER, pairtype, ierr)
  call MPI_Type_commit(pairtype, ierr)
  call MPI_Op_create(sum_and_max, .false., op, ierr)
  pair = [rank + 1, 10 * rank]
  call MPI_Allreduce(pair, pairs, 1, pairtype, op, MPI_COMM_WORLD, ierr)
  call check(pairs(1) == n * (n + 1) / 2 .and. pairs(2) == 10 * (n - 1), 'user op allreduce')
  pair = [1, 5]
  pairs = [2, 3]
  call MPI_Reduce_local(pair, pairs, 1, pairtype, op, ierr)
  call check(pairs(1) == 3 .and. pairs(2) == 5, 'reduce_local user op')
  call MPI_Reduce_local([4, 4], pairs, 2, MPI_INTEGER, MPI_PROD, ierr)
  call check(pairs(1) == 12 .and. pairs(2) == 20, 'reduce_local MPI_PROD')
  call MPI_Op_free(op, ierr)
  call check(op == MPI_OP_NULL, 'op_free')
  call MPI_Type_free(pairtype, ierr)

  j = 0
  call MPI_Allreduce(nbad, total, 1, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, ierr)
  if (rank == 0 .and. total == 0) print '(A)', 'OK'
  call MPI_Finalize(ierr)
contains
  subroutine check(ok, what)
    logical, intent(in) :: ok
    character(len=*), intent(in) :: what
    if (.not. ok) then
      nbad = nbad + 1
      print '(A,I0,2A)', 'FAIL rank ', rank, ': ', what
    end if
  end subroutine check
end program coll
