// Process-wide MPI lifetime and error translation of the Python module.
//
// Why the module initialises MPI itself instead of letting
// Communicator::createMpiWorld() do it: in C++, finalize() of the world
// communicator finalises MPI when boostcomm initialised it. In Python several
// communicators live at once (the comm_init one, one per c10d process group),
// destroyed in an order the garbage collector picks, so finalising MPI with
// the first of them would break the others. Here MPI is initialised once
// (only if nobody has, e.g. mpi4py first), every communicator is finalised at
// interpreter exit, and MPI_Finalize runs last, only if this module called
// MPI_Init_thread.
#pragma once

#include <pybind11/pybind11.h>

#include <string>
#include <vector>

namespace boostcomm::python {

// Initialises MPI (MPI_THREAD_MULTIPLE requested) unless it already is.
// Returns the thread level MPI provides.
int ensureMpi();
// MPI_COMM_WORLD rank and size (initialises MPI if needed).
int launcherRank();
int launcherSize();
// MPI_Finalize when ensureMpi() initialised MPI and it is not finalised yet.
// Returns whether it finalised.
bool finalizeMpiIfOurs();
bool mpiInitializedHere();

// Agreement across MPI_COMM_WORLD before a collective constructor: every rank
// passes whether its arguments are valid; returns the ranks that are not
// (empty when all are fine). Lets one rank's bad argument raise on every rank
// instead of hanging the others inside MPI_Comm_dup.
std::vector<int> ranksThatFailed(bool ok);
// Collective over MPI_COMM_WORLD: rank 0's text on every rank.
std::string broadcastText(const std::string& text);

// Registers boostcomm.Error and its subclasses on `m` and translates
// boostcomm::Error into them.
void registerErrors(pybind11::module_& m);

}  // namespace boostcomm::python
