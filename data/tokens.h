/* tokens.h - what the library's own files need of the token data beyond the public API
 * (include/zerotrain.h has the reader and writer). */
#ifndef ZT_DATA_TOKENS_H
#define ZT_DATA_TOKENS_H

#include "zerotrain.h"

/* The path of the data's manifest.json, for messages that name the data (never NULL). */
const char *zt_token_data_manifest(const zt_token_data *d);

#endif
