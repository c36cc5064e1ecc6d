! Point-to-point through mpif.h (free form): every send mode, nonblocking and
! persistent requests, wait/test families (1-based indices), probe, cancel,
! MPI_STATUS_IGNORE / MPI_STATUSES_IGNORE, MPI_PROC_NULL and MPI_ANY_SOURCE.
! Rank 0 prints OK when every rank's checks passed.
program p2p
  implicit none
  include 'mpif.h'
  integer :: ierr, rank, nprocs, next, prev, nbad, total, i, idx, outcount, count
  integer :: status(MPI_STATUS_SIZE), statuses(MPI_STATUS_SIZE, 4)
  integer :: reqs(4), indices(4), bsize
  ! volatile: the compiler must not assume a buffer is unchanged across a
  ! wait (or unread by a start) it was not passed to; -O2 would.
  integer, volatile :: sbuf(10), rbuf(10), rbufs(4)
  double precision :: dsend(5), drecv(5)
  character(len=1), allocatable :: attach(:)
  logical :: flag
  nbad = 0
  call MPI_Init(ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
  call MPI_Comm_size(MPI_COMM_WORLD, nprocs, ierr)
  next = mod(rank + 1, nprocs)
  prev = mod(rank + nprocs - 1, nprocs)

  ! send/recv of doubles (the receive is posted first: a blocking send to
  ! oneself at 1 rank need not complete otherwise, and MPICH's does not)
  dsend = [(rank * 10.0d0 + i, i = 1, 5)]
  call MPI_Irecv(drecv, 5, MPI_DOUBLE_PRECISION, prev, 1, MPI_COMM_WORLD, reqs(1), ierr)
  call MPI_Send(dsend, 5, MPI_DOUBLE_PRECISION, next, 1, MPI_COMM_WORLD, ierr)
  call MPI_Wait(reqs(1), status, ierr)
  call check(all(drecv == [(prev * 10.0d0 + i, i = 1, 5)]), 'send/recv data')
  call check(status(MPI_SOURCE) == prev .and. status(MPI_TAG) == 1, 'recv status')
  call MPI_Get_count(status, MPI_DOUBLE_PRECISION, count, ierr)
  call check(count == 5, 'get_count')
  call MPI_Get_elements(status, MPI_DOUBLE_PRECISION, count, ierr)
  call check(count == 5, 'get_elements')

  ! ssend / rsend (receiver posted first) / bsend with an attached buffer
  call MPI_Irecv(rbuf, 3, MPI_INTEGER, prev, 2, MPI_COMM_WORLD, reqs(1), ierr)
  call MPI_Barrier(MPI_COMM_WORLD, ierr)
  sbuf(1:3) = [rank, rank + 1, rank + 2]
  call MPI_Rsend(sbuf, 3, MPI_INTEGER, next, 2, MPI_COMM_WORLD, ierr)
  call MPI_Wait(reqs(1), status, ierr)
  call check(all(rbuf(1:3) == [prev, prev + 1, prev + 2]), 'rsend data')
  call check(reqs(1) == MPI_REQUEST_NULL, 'wait frees request')

  call MPI_Irecv(rbuf, 1, MPI_INTEGER, MPI_ANY_SOURCE, 3, MPI_COMM_WORLD, reqs(1), ierr)
  call MPI_Ssend(rank, 1, MPI_INTEGER, next, 3, MPI_COMM_WORLD, ierr)
  call MPI_Wait(reqs(1), status, ierr)
  call check(rbuf(1) == prev .and. status(MPI_SOURCE) == prev, 'ssend + any_source')

  call MPI_Pack_size(1, MPI_INTEGER, MPI_COMM_WORLD, bsize, ierr)
  bsize = bsize + MPI_BSEND_OVERHEAD
  allocate(attach(bsize))
  call MPI_Buffer_attach(attach, bsize, ierr)
  call MPI_Bsend(rank + 1000, 1, MPI_INTEGER, next, 4, MPI_COMM_WORLD, ierr)
  call MPI_Recv(rbuf, 1, MPI_INTEGER, prev, 4, MPI_COMM_WORLD, MPI_STATUS_IGNORE, ierr)
  call check(rbuf(1) == prev + 1000, 'bsend data')
  call check(all(MPI_STATUS_IGNORE == 0), 'nothing written into MPI_STATUS_IGNORE')
  call MPI_Buffer_detach(attach, bsize, ierr)
  call check(ierr == MPI_SUCCESS, 'buffer_detach')

  ! nonblocking: waitall with MPI_STATUSES_IGNORE, then waitany/testsome indices
  call MPI_Irecv(rbufs(1), 1, MPI_INTEGER, prev, 5, MPI_COMM_WORLD, reqs(1), ierr)
  call MPI_Irecv(rbufs(2), 1, MPI_INTEGER, next, 6, MPI_COMM_WORLD, reqs(2), ierr)
  call MPI_Isend(rank, 1, MPI_INTEGER, next, 5, MPI_COMM_WORLD, reqs(3), ierr)
  call MPI_Isend(rank, 1, MPI_INTEGER, prev, 6, MPI_COMM_WORLD, reqs(4), ierr)
  call MPI_Waitall(4, reqs, MPI_STATUSES_IGNORE, ierr)
  call check(rbufs(1) == prev .and. rbufs(2) == next, 'isend/irecv/waitall')
  call check(all(reqs == MPI_REQUEST_NULL), 'waitall frees')
  call check(all(MPI_STATUSES_IGNORE == 0), 'nothing written into MPI_STATUSES_IGNORE')

  reqs(1) = MPI_REQUEST_NULL
  call MPI_Irecv(rbufs(2), 1, MPI_INTEGER, prev, 8, MPI_COMM_WORLD, reqs(2), ierr)
  call MPI_Send(rank, 1, MPI_INTEGER, next, 8, MPI_COMM_WORLD, ierr)
  call MPI_Waitany(2, reqs, idx, status, ierr)
  call check(idx == 2, 'waitany index is 1-based')
  call check(status(MPI_SOURCE) == prev .and. status(MPI_TAG) == 8, 'waitany status')
  call MPI_Waitany(2, reqs, idx, status, ierr)
  call check(idx == MPI_UNDEFINED, 'waitany on null requests')

  call MPI_Irecv(rbufs(1), 1, MPI_INTEGER, prev, 9, MPI_COMM_WORLD, reqs(1), ierr)
  call MPI_Irecv(rbufs(2), 1, MPI_INTEGER, prev, 10, MPI_COMM_WORLD, reqs(2), ierr)
  call MPI_Send(rank, 1, MPI_INTEGER, next, 10, MPI_COMM_WORLD, ierr)
  outcount = 0
  do while (outcount == 0)
    call MPI_Testsome(2, reqs, outcount, indices, statuses, ierr)
  end do
  call check(outcount == 1 .and. indices(1) == 2, 'testsome 1-based indices')
  call check(statuses(MPI_TAG, 1) == 10, 'testsome status')
  ! nobody sends tag 9 before every rank has seen tag 10 alone
  call MPI_Barrier(MPI_COMM_WORLD, ierr)
  call MPI_Send(rank, 1, MPI_INTEGER, next, 9, MPI_COMM_WORLD, ierr)
  call MPI_Waitsome(2, reqs, outcount, indices, statuses, ierr)
  call check(outcount == 1 .and. indices(1) == 1, 'waitsome 1-based indices')
  flag = .false.
  do while (.not. flag)
    call MPI_Testany(2, reqs, idx, flag, status, ierr)
  end do
  call check(idx == MPI_UNDEFINED, 'testany all null')
  call MPI_Testall(2, reqs, flag, MPI_STATUSES_IGNORE, ierr)
  call check(flag, 'testall on nulls')

  ! probe / iprobe then receive what was probed
  call MPI_Isend(sbuf, 7, MPI_INTEGER, next, 11, MPI_COMM_WORLD, reqs(3), ierr)
  call MPI_Probe(MPI_ANY_SOURCE, 11, MPI_COMM_WORLD, status, ierr)
  call MPI_Get_count(status, MPI_INTEGER, count, ierr)
  call check(count == 7 .and. status(MPI_SOURCE) == prev, 'probe')
  call MPI_Recv(rbuf, count, MPI_INTEGER, status(MPI_SOURCE), 11, MPI_COMM_WORLD, status, ierr)
  call MPI_Isend(rank, 1, MPI_INTEGER, next, 12, MPI_COMM_WORLD, reqs(4), ierr)
  flag = .false.
  do while (.not. flag)
    call MPI_Iprobe(prev, 12, MPI_COMM_WORLD, flag, status, ierr)
  end do
  call check(status(MPI_TAG) == 12, 'iprobe status')
  call MPI_Recv(rbuf, 1, MPI_INTEGER, prev, 12, MPI_COMM_WORLD, MPI_STATUS_IGNORE, ierr)
  call MPI_Waitall(2, reqs(3:4), MPI_STATUSES_IGNORE, ierr)

  ! persistent requests, started twice
  call MPI_Send_init(sbuf, 1, MPI_INTEGER, next, 13, MPI_COMM_WORLD, reqs(1), ierr)
  call MPI_Recv_init(rbuf, 1, MPI_INTEGER, prev, 13, MPI_COMM_WORLD, reqs(2), ierr)
  do i = 1, 2
    sbuf(1) = rank * 100 + i
    call MPI_Startall(2, reqs, ierr)
    call MPI_Waitall(2, reqs, statuses, ierr)
    call check(rbuf(1) == prev * 100 + i, 'persistent round')
    call check(reqs(1) /= MPI_REQUEST_NULL, 'persistent request survives wait')
  end do
  call MPI_Request_free(reqs(1), ierr)
  call MPI_Request_free(reqs(2), ierr)
  call check(reqs(1) == MPI_REQUEST_NULL, 'request_free')

  ! cancel an unmatched receive
  call MPI_Irecv(rbuf, 1, MPI_INTEGER, prev, 999, MPI_COMM_WORLD, reqs(1), ierr)
  call MPI_Cancel(reqs(1), ierr)
  call MPI_Wait(reqs(1), status, ierr)
  call MPI_Test_cancelled(status, flag, ierr)
  call check(flag, 'test_cancelled')

  ! MPI_PROC_NULL completes at once with the documented status
  call MPI_Recv(rbuf, 1, MPI_INTEGER, MPI_PROC_NULL, 1, MPI_COMM_WORLD, status, ierr)
  call check(status(MPI_SOURCE) == MPI_PROC_NULL .and. status(MPI_TAG) == MPI_ANY_TAG, &
             'proc_null status')
  call MPI_Get_count(status, MPI_INTEGER, count, ierr)
  call check(count == 0, 'proc_null count')

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
end program p2p
