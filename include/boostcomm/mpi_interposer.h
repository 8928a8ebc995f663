/* libboostcomm_mpi.so, the MPI interposer (docs/MPI_INTERPOSER.md): what it
 * did with the calling thread's last intercepted collective. C, so that any
 * MPI program can ask; find it with dlsym(RTLD_DEFAULT, ...) to stay loadable
 * without the preload. */
#ifndef BOOSTCOMM_MPI_INTERPOSER_H
#define BOOSTCOMM_MPI_INTERPOSER_H

#ifdef __cplusplus
extern "C" {
#endif

/* Why a call went to PMPI unchanged, or BOOSTCOMM_MPI_ROUTED. */
enum boostcomm_mpi_reason {
  BOOSTCOMM_MPI_ROUTED = 0,
  BOOSTCOMM_MPI_DISABLED = 1,      /* BOOSTCOMM_MPI_INTERPOSE leaves it out */
  BOOSTCOMM_MPI_NOT_ACTIVE = 2,    /* before MPI_Init, or MPI_Finalize began */
  BOOSTCOMM_MPI_NULL_COMM = 3,
  BOOSTCOMM_MPI_INTERCOMM = 4,
  BOOSTCOMM_MPI_SINGLE_RANK = 5,
  BOOSTCOMM_MPI_CREATE_FAILED = 6,
  BOOSTCOMM_MPI_NOT_SEEN = 7,      /* nonblocking call on a communicator not set up and not reserved at creation */
  BOOSTCOMM_MPI_THREAD_LEVEL = 8,  /* nonblocking call without MPI_THREAD_MULTIPLE / progress thread */
  BOOSTCOMM_MPI_DATATYPE = 9,      /* reduction over a type boostcomm does not reduce */
  BOOSTCOMM_MPI_OP = 10,           /* user op or an op boostcomm lacks */
  BOOSTCOMM_MPI_SMALL = 11,        /* below BOOSTCOMM_MPI_MIN_BYTES */
  BOOSTCOMM_MPI_COUNTS = 12,       /* MPI_Reduce_scatter with unequal recvcounts */
  BOOSTCOMM_MPI_ARGUMENTS = 13,    /* arguments MPI would reject */
  BOOSTCOMM_MPI_NATIVE = 14        /* servable, and boostcomm's selection picks MPI's own algorithm at this
                                      size: PMPI is called directly (not a fall-through) */
};

/* The reason of this thread's last collective intercepted from the
 * application (boostcomm's own MPI calls do not count); -1 before any. */
int boostcomm_mpi_last_reason(void);

#ifdef __cplusplus
}
#endif

#endif
