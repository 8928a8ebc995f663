/* Input patterns of the interposer tests: small integers, so that sums and
 * products are exact in every type and any reduction order, and MPI's and
 * boostcomm's results can be compared bit for bit. */
#ifndef BC_INTERPOSER_DATA_H
#define BC_INTERPOSER_DATA_H

#include <mpi.h>
#include <stddef.h>

/* Element i of rank `rank`'s input; prod inputs are 1 or 2. */
void fill(void* buf, MPI_Datatype type, int count, int rank, int seed, int forProd);
/* Allocates count elements of type (at least one byte), filled with a poison pattern. */
void* alloc(MPI_Datatype type, int count);
size_t typeSize(MPI_Datatype type);
const char* typeName(MPI_Datatype type);
const char* opName(MPI_Op op);

#endif
