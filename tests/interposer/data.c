#include "data.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

size_t typeSize(MPI_Datatype type) {
  int size = 0;
  PMPI_Type_size(type, &size);
  return (size_t)size;
}

void* alloc(MPI_Datatype type, int count) {
  size_t bytes = typeSize(type) * (size_t)(count > 0 ? count : 1);
  void* p = malloc(bytes);
  memset(p, 0xA5, bytes);
  return p;
}

void fill(void* buf, MPI_Datatype type, int count, int rank, int seed, int forProd) {
  for (int i = 0; i < count; ++i) {
    const long v = forProd ? 1 + ((rank + i + seed) % 2) : ((rank * 31 + i * 7 + seed * 3) % 13) - 6;
    if (type == MPI_FLOAT) ((float*)buf)[i] = (float)v;
    else if (type == MPI_DOUBLE) ((double*)buf)[i] = (double)v;
    else if (type == MPI_INT) ((int*)buf)[i] = (int)v;
    else if (type == MPI_LONG_LONG) ((long long*)buf)[i] = (long long)v * (forProd ? 1 : 1000000007LL);
    else if (type == MPI_LONG) ((long*)buf)[i] = v;
    else if (type == MPI_SHORT) ((short*)buf)[i] = (short)v;
    else ((unsigned char*)buf)[i] = (unsigned char)(v & 0xFF);
  }
}

const char* typeName(MPI_Datatype type) {
  if (type == MPI_FLOAT) return "float";
  if (type == MPI_DOUBLE) return "double";
  if (type == MPI_INT) return "int";
  if (type == MPI_LONG_LONG) return "long long";
  if (type == MPI_LONG) return "long";
  if (type == MPI_UNSIGNED_CHAR) return "unsigned char";
  if (type == MPI_BYTE) return "byte";
  if (type == MPI_SHORT) return "short";
  return "derived";
}

const char* opName(MPI_Op op) {
  if (op == MPI_SUM) return "sum";
  if (op == MPI_MIN) return "min";
  if (op == MPI_MAX) return "max";
  if (op == MPI_PROD) return "prod";
  return "other";
}
