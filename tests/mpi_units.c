/* mpi_units.c - the unit API across ranks (run under mpirun -np 2 by tests/test_units.sh):
 * ranks that acquire different units while the order is being recorded get an error naming
 * both, not a hang; ranks that declare different orders are refused the same way; stage 3's
 * traffic report (a replay of the recorded order) equals the gathers measured, for holds
 * that do not nest; ranks that register different shapes, or one rank that fails alone at
 * commit, are refused on every rank with a message naming the unit or that rank. Prints one line per check; the exit status is the verdict. */
#define ZT_EXPERIMENTAL
#include "zerotrain.h"

#include <math.h>
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

/* one step of five units with overlapping holds: forward 0 (1) 2 3 0 4, backward 4, 3 with
 * 1, 2, 1, 0 */
static int odd_step(zt_engine *e)
{
    float *p, *g, *p1, *g1;
    int rc = 0;
#define T(x) (rc = rc < 0 ? rc : (x))
    T(zt_engine_unit_acquire(e, 0, ZT_FOR_FORWARD, &p, NULL));
    T(zt_engine_unit_acquire(e, 1, ZT_FOR_FORWARD, &p, NULL));
    T(zt_engine_unit_release(e, 1));
    T(zt_engine_unit_acquire(e, 2, ZT_FOR_FORWARD, &p, NULL));
    T(zt_engine_unit_release(e, 0));
    T(zt_engine_unit_release(e, 2));
    T(zt_engine_unit_acquire(e, 3, ZT_FOR_FORWARD, &p, NULL));
    T(zt_engine_unit_acquire(e, 0, ZT_FOR_FORWARD, &p, NULL));
    T(zt_engine_unit_release(e, 3));
    T(zt_engine_unit_release(e, 0));
    T(zt_engine_unit_acquire(e, 4, ZT_FOR_FORWARD, &p, NULL));
    T(zt_engine_unit_release(e, 4));
    int order[5] = {4, 3, 2, 1, 0};
    for (int k = 0; k < 5 && rc == 0; k++) {
        int u = order[k];
        if (u == 1) /* (made ready with unit 3) */
            continue;
        T(zt_engine_unit_acquire(e, u, ZT_FOR_BACKWARD, &p, &g));
        if (u == 3)
            T(zt_engine_unit_acquire(e, 1, ZT_FOR_BACKWARD, &p1, &g1));
        T(zt_engine_unit_grads_ready(e, u));
        T(zt_engine_unit_release(e, u));
        if (u == 3) {
            T(zt_engine_unit_release(e, 1));
            T(zt_engine_unit_acquire(e, 1, ZT_FOR_BACKWARD, &p1, &g1));
            T(zt_engine_unit_grads_ready(e, 1));
            T(zt_engine_unit_release(e, 1));
        }
    }
    T(zt_engine_step(e, 1e-3f, NULL));
    T(zt_engine_zero_grad(e));
#undef T
    return rc;
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
    for (int pf = 0; pf <= 1; pf++) {
        zt_config c;
        zt_engine *t = NULL;
        zt_engine_report r0, r1;
        zt_config_init(&c);
        c.zero_stage = 3;
        c.persist_threshold = 0;
        c.prefetch_size = pf ? 100000 : 0;
        int rc = zt_engine_create(&c, MPI_COMM_WORLD, &t);
        for (int u = 0; rc == 0 && u < 5; u++) {
            char n[16];
            int64_t sh[1] = {300 + 1000 * u};
            int id;
            snprintf(n, sizeof n, "t%d", u);
            zt_param_spec sp = {n, 1, sh, ZT_INIT_ONES, 0, NULL, 0, NULL};
            rc = zt_engine_add_unit(t, n, 1, &id);
            rc = rc < 0 ? rc : zt_engine_add_param(t, id, &sp, NULL);
        }
        if (rc < 0 || (rc = odd_step(t)) < 0 || (rc = zt_engine_report_get(t, &r0)) < 0 ||
            (rc = odd_step(t)) < 0 || (rc = zt_engine_report_get(t, &r1)) < 0) {
            printf("FAIL: rank %d: the overlapping holds: %s\n", rank, zt_engine_last_error(t));
            bad = 1;
        } else {
            double rs = (double)(r1.coll_bytes[0] - r0.coll_bytes[0]);
            double ag = (double)(r1.coll_bytes[1] - r0.coll_bytes[1]);
            int same = fabs((rs + ag) / rs - r1.traffic_schedule) < 1e-9;
            printf("%s: rank %d: prefetch %d: traffic report %.4f, measured %.4f\n",
                   same ? "ok" : "FAIL", rank, pf ? 100000 : 0, r1.traffic_schedule,
                   (rs + ag) / rs);
            bad |= !same;
        }
        zt_engine_destroy(t);
    }
    /* the last rank registers another shape; then it fails alone at commit: every rank is
     * refused, naming the unit or the failing rank and its message, none waits */
    for (int k = 0; k < 2; k++) {
        int size = 0, last;
        zt_config c;
        zt_engine *t = NULL;
        MPI_Comm_size(MPI_COMM_WORLD, &size);
        last = rank == size - 1;
        zt_config_init(&c);
        c.zero_stage = 3;
        c.collective_timeout = 20;
        int rc = zt_engine_create(&c, MPI_COMM_WORLD, &t), id;
        int64_t sh[1] = {k == 0 && last ? 1001 : 1000};
        zt_param_spec sp = {"w", 1, sh, ZT_INIT_ONES, 0, NULL, 0, NULL};
        if (rc == 0 && !(k == 1 && last)) /* (k = 1: the last rank registers no unit) */
            rc = zt_engine_add_unit(t, "w", 1, &id) < 0 ? -1 : zt_engine_add_param(t, id, &sp, NULL);
        if (rc == 0)
            rc = zt_engine_commit(t);
        char want[96];
        if (k == 0)
            snprintf(want, sizeof want, "the ranks disagree on unit 0: rank 0 has \"w, 1000 floats\", "
                     "rank %d has \"w, 1001 floats\"", size - 1);
        else if (last)
            snprintf(want, sizeof want, "no units registered");
        else
            snprintf(want, sizeof want, "rank %d: zt_engine_commit: no units registered", size - 1);
        bad |= expect(rank, rc, t ? zt_engine_last_error(t) : zt_last_error(), want,
                      k ? "one rank fails at commit" : "different shapes");
        zt_engine_destroy(t);
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
