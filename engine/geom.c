/* geom.c - shard geometry (geom.h). */
#include "geom.h"
#include "comm.h"
#include "../common/err.h"
#include "../models/model.h"

#include <stdlib.h>
#include <string.h>

size_t zt_geom_piece_for(size_t numel, size_t N, size_t bucket, size_t *padded)
{
    size_t q = (size_t)ZT_SHARD_ALIGN * N, most = ZT_COMM_MAX_SLICE * N / q * q, p;
    *padded = (numel + q - 1) / q * q;
    p = bucket ? bucket / q * q : *padded;
    p = p < q ? q : p;
    p = p > most ? most : p; /* a piece's slice must fit an int count */
    return p < *padded ? p : *padded;
}

int zt_geom_seg(const zt_geom *g, int r, int k, zt_seg *s)
{
    size_t off0 = (size_t)k * g->piece, len;
    if (k < 0 || off0 >= g->padded)
        return 0;
    len = g->padded - off0 < g->piece ? g->padded - off0 : g->piece;
    s->len = len / g->N;
    s->off = off0 + (size_t)r * s->len;
    s->soff = off0 / g->N;
    return 1;
}

int zt_geometry_init(zt_geometry *g, const zt_layout *L, size_t N, size_t bucket)
{
    int nu = L->n_units;
    memset(g, 0, sizeof *g);
    if (!(g->padded = calloc((size_t)nu + 1, sizeof *g->padded)) ||
        !(g->piece = calloc((size_t)nu + 1, sizeof *g->piece))) {
        zt_geometry_free(g);
        return zt_fail(ZT_E_NOMEM, "out of memory");
    }
    g->n_units = nu;
    g->N = N;
    g->bucket = bucket;
    for (int u = 0; u < nu; u++)
        g->piece[u] = zt_geom_piece_for(L->units[u].numel, N, bucket, &g->padded[u]);
    return 0;
}

void zt_geometry_free(zt_geometry *g)
{
    free(g->padded);
    free(g->piece);
    g->padded = g->piece = NULL;
    g->n_units = 0;
}

zt_geom zt_geometry_unit(const zt_geometry *g, int u)
{
    zt_geom x = {g->padded[u], g->piece[u], g->N};
    return x;
}

size_t zt_geometry_len(const zt_geometry *g, int u, int shard)
{
    return shard ? g->padded[u] / g->N : g->padded[u];
}

size_t zt_geometry_max(const zt_geometry *g, int except)
{
    size_t m = 0;
    for (int u = 0; u < g->n_units; u++)
        if (u != except)
            m = g->padded[u] > m ? g->padded[u] : m;
    return m;
}

size_t zt_geometry_max_shard(const zt_geometry *g) { return zt_geometry_max(g, -1) / g->N; }

double zt_geometry_total(const zt_geometry *g)
{
    double P = 0.0;
    for (int u = 0; u < g->n_units; u++)
        P += (double)g->padded[u];
    return P;
}

int zt_geometry_seg(const zt_geometry *g, int u, int r, int k, zt_seg *s)
{
    zt_geom x = zt_geometry_unit(g, u);
    return zt_geom_seg(&x, r, k, s);
}

void zt_geometry_take(const zt_geometry *g, int u, int r, const void *whole, void *shard,
                      size_t es)
{
    zt_seg s;
    for (int k = 0; zt_geometry_seg(g, u, r, k, &s); k++)
        memcpy((char *)shard + s.soff * es, (const char *)whole + s.off * es, s.len * es);
}

void zt_geometry_put(const zt_geometry *g, int u, int r, const void *shard, void *whole,
                     size_t es)
{
    zt_seg s;
    for (int k = 0; zt_geometry_seg(g, u, r, k, &s); k++)
        memcpy((char *)whole + s.off * es, (const char *)shard + s.soff * es, s.len * es);
}
