/* comm.h - the engine's view of its communicator. The only library code that calls MPI
 * lives in comm.c; collectives for sharding arrive with the ZeRO stages. */
#ifndef ZT_ENGINE_COMM_H
#define ZT_ENGINE_COMM_H

#include <mpi.h>

typedef struct zt_comm {
    MPI_Comm comm;   /* our duplicate, MPI_COMM_NULL when running without MPI */
    int rank, size;
} zt_comm;

/* parent may be MPI_COMM_NULL: one rank, no MPI calls. Otherwise MPI must be initialised;
 * the communicator is duplicated and set to MPI_ERRORS_RETURN. */
int zt_comm_open(zt_comm *c, MPI_Comm parent);
void zt_comm_close(zt_comm *c);

#endif
