// <mpi.h> with the C bindings only: the deprecated MPI C++ bindings would need
// libmpi_cxx. Include this instead of <mpi.h> everywhere in boostcomm.
#pragma once

#ifndef OMPI_SKIP_MPICXX
#define OMPI_SKIP_MPICXX 1
#endif
#ifndef MPICH_SKIP_MPICXX
#define MPICH_SKIP_MPICXX 1
#endif
#include <mpi.h>
