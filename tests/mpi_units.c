/* mpi_units.c - the unit API across ranks (run under mpirun -np 2 by tests/test_units.sh):
 * ranks that acquire different units while the order is being recorded get an error naming
 * both, not a hang; ranks that declare different orders are refused the same way. Prints
 * one line per check; the exit status is the verdict. */
#define ZT_EXPERIMENTAL
#include "zerotrain.h"

#include <stdio.h>
#include <string.h>

static zt_engine *model(int stage)
{
    zt_config c;
    zt_engine *e = NULL;
    zt_config_init(&c);
    c.zero_stage = stage;
    c.persist_threshold = 0; /* gather every unit */
    c.collective_timeout = 20;
    if (zt_engine_create(&c, MPI_COMM_WORLD, &e) != 0)
        return NULL;
    for (int u = 0; u < 2; u++) {
        char n[16];
        int64_t sh[1] = {u ? 3000 : 5000};
        int id;
        snprintf(n, sizeof n, "u%d", u);
        zt_param_spec s = {n, 1, sh, ZT_INIT_NORMAL, 0.02f, NULL, 0, NULL};
        if (zt_engine_add_unit(e, n, 1, &id) != 0 || zt_engine_add_param(e, id, &s, NULL) != 0) {
            zt_engine_destroy(e);
            return NULL;
        }
    }
    return e;
}

static int expect(int rank, int rc, const char *msg, const char *needle, const char *what)
{
    int ok = rc < 0 && strstr(msg, needle);
    printf("%s: rank %d: %s: %s\n", ok ? "ok" : "FAIL", rank, what, msg);
    return ok ? 0 : 1;
}

int main(int argc, char **argv)
{
    int rank, bad = 0;
    float *p;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    for (int stage = 0; stage <= 3; stage += 3) {
        zt_engine *e = model(stage);
        if (!e) {
            printf("FAIL: rank %d: %s\n", rank, zt_last_error());
            bad = 1;
            break;
        }
        int rc = zt_engine_unit_acquire(e, rank == 0 ? 0 : 1, ZT_FOR_FORWARD, &p, NULL);
        bad |= expect(rank, rc, zt_engine_last_error(e), "the ranks acquire different units",
                      stage ? "stage 3, mismatched acquires" : "stage 0, mismatched acquires");
        zt_engine_destroy(e);
    }
    zt_engine *e = model(3);
    int units[2] = {0, 1}, purp[2] = {ZT_FOR_FORWARD, ZT_FOR_FORWARD};
    if (rank == 1)
        units[0] = 1, units[1] = 0;
    int rc = e ? zt_engine_set_order(e, ZT_FOR_FORWARD, units, purp, NULL, 2) : -1;
    bad |= expect(rank, rc, e ? zt_engine_last_error(e) : zt_last_error(),
                  "declared a different forward order", "mismatched declared orders");
    zt_engine_destroy(e);
    MPI_Finalize();
    return bad;
}
