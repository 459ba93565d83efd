/* comm.c - duplicates the caller's communicator with MPI_ERRORS_RETURN and maps MPI
 * failures to ZT_E_MPI with MPI_Error_string. Never calls MPI_Init or MPI_Finalize. */
#include "comm.h"
#include "../common/err.h"

static int mpi_fail(int rc, const char *what)
{
    char msg[MPI_MAX_ERROR_STRING];
    int len = 0;
    if (MPI_Error_string(rc, msg, &len) != MPI_SUCCESS)
        len = 0;
    msg[len] = '\0';
    return zt_fail(ZT_E_MPI, "%s failed: %s", what, msg);
}

int zt_comm_open(zt_comm *c, MPI_Comm parent)
{
    int inited = 0, finalized = 0, rc;
    c->comm = MPI_COMM_NULL;
    c->rank = 0;
    c->size = 1;
    if (parent == MPI_COMM_NULL)
        return 0;
    MPI_Initialized(&inited);
    MPI_Finalized(&finalized);
    if (!inited || finalized)
        return zt_fail(ZT_E_INVAL, "a communicator was given but MPI is not initialised "
                                   "(call MPI_Init first, or pass MPI_COMM_NULL)");
    if ((rc = MPI_Comm_dup(parent, &c->comm)) != MPI_SUCCESS)
        return mpi_fail(rc, "MPI_Comm_dup");
    if ((rc = MPI_Comm_set_errhandler(c->comm, MPI_ERRORS_RETURN)) != MPI_SUCCESS ||
        (rc = MPI_Comm_rank(c->comm, &c->rank)) != MPI_SUCCESS ||
        (rc = MPI_Comm_size(c->comm, &c->size)) != MPI_SUCCESS) {
        MPI_Comm_free(&c->comm);
        return mpi_fail(rc, "setting up the communicator");
    }
    return 0;
}

void zt_comm_close(zt_comm *c)
{
    int finalized = 0;
    if (c->comm == MPI_COMM_NULL)
        return;
    MPI_Finalized(&finalized);
    if (!finalized)
        MPI_Comm_free(&c->comm);
    c->comm = MPI_COMM_NULL;
}
