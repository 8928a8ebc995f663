! Fortran (use mpi) under libboostcomm_mpi.so. Open MPI 4.1's Fortran wrappers
! call PMPI_* directly, so only the interposer's own Fortran entry points
! (src/interposer/fortran.cc) can route these calls; the interposer's
! boostcomm_mpi_last_reason tells whether they did.
! usage: test_fortran [--expect-preload]
program test_fortran
  use mpi
  use, intrinsic :: iso_c_binding
  implicit none
  interface
    function last_reason() bind(C, name="lastReason")
      import :: c_int
      integer(c_int) :: last_reason
    end function
  end interface
  integer, parameter :: n = 1031
  integer :: ierr, rank, nranks, i, failures, total, expect
  double precision :: x(n), y(n), want(n)
  integer :: k(n), kw(n)
  character(len=32) :: arg
  logical :: preload

  call MPI_INIT(ierr)
  call MPI_COMM_RANK(MPI_COMM_WORLD, rank, ierr)
  call MPI_COMM_SIZE(MPI_COMM_WORLD, nranks, ierr)
  preload = .false.
  if (command_argument_count() >= 1) then
    call get_command_argument(1, arg)
    preload = trim(arg) == "--expect-preload"
  end if
  failures = 0
  expect = 0  ! BOOSTCOMM_MPI_ROUTED

  do i = 1, n
    x(i) = dble(mod(rank * 31 + i * 7, 13) - 6)
    k(i) = mod(rank * 17 + i, 11) - 5
  end do
  want = 0
  kw = 0
  call MPI_ALLREDUCE(x, y, n, MPI_DOUBLE_PRECISION, MPI_SUM, MPI_COMM_WORLD, ierr)
  call check_reason("allreduce double precision")
  call PMPI_ALLREDUCE(x, want, n, MPI_DOUBLE_PRECISION, MPI_SUM, MPI_COMM_WORLD, ierr)
  if (any(y /= want)) call fail("allreduce double precision result")

  y = x
  call MPI_ALLREDUCE(MPI_IN_PLACE, y, n, MPI_DOUBLE_PRECISION, MPI_SUM, MPI_COMM_WORLD, ierr)
  call check_reason("allreduce in place")
  if (any(y /= want)) call fail("allreduce in place result")

  call MPI_ALLREDUCE(k, kw, n, MPI_INTEGER, MPI_MAX, MPI_COMM_WORLD, ierr)
  call check_reason("allreduce integer max")
  call PMPI_ALLREDUCE(k, k, 0, MPI_INTEGER, MPI_MAX, MPI_COMM_WORLD, ierr)

  y = x
  call MPI_BCAST(y, n, MPI_DOUBLE_PRECISION, nranks - 1, MPI_COMM_WORLD, ierr)
  call check_reason("bcast")
  want = x
  call PMPI_BCAST(want, n, MPI_DOUBLE_PRECISION, nranks - 1, MPI_COMM_WORLD, ierr)
  if (any(y /= want)) call fail("bcast result")

  call MPI_BARRIER(MPI_COMM_WORLD, ierr)
  call check_reason("barrier")

  call PMPI_ALLREDUCE(failures, total, 1, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, ierr)
  if (rank == 0) print '(a, i0, a, i0, a)', "test_fortran: ", nranks, " ranks, ", total, " failures"
  call MPI_FINALIZE(ierr)
  if (total /= 0) stop 1

contains
  subroutine fail(what)
    character(len=*), intent(in) :: what
    failures = failures + 1
    print '(a, i0, a, a)', "rank ", rank, ": FAIL ", what
  end subroutine
  subroutine check_reason(what)
    character(len=*), intent(in) :: what
    if (ierr /= MPI_SUCCESS) call fail(what // ": ierr")
    if (preload) then
      ! 14: BOOSTCOMM_MPI_NATIVE, the selection chose MPI's own algorithm
      if (last_reason() /= expect .and. last_reason() /= 14) call fail(what // ": not routed")
    end if
  end subroutine
end program
