/* SPDX-License-Identifier: BSD-3-Clause */
/* stabledif fuzz targets: a server disk for a fuzz configuration.
 * Only for the targets that drive server/ (they link it); kept out of
 * fuzz-common.h so that the others need no server headers. */
#ifndef STABLEDIF_FUZZ_DISK_H
#define STABLEDIF_FUZZ_DISK_H

#include <string.h>

#include "disk.h"
#include "fuzz-common.h"

/* Fill *CFG (zeroed first) for a memory disk of NBLOCKS blocks in
 * configuration C, whose pi_params are PP (fuzz_config_params).  The
 * caller sets what is its own: event ring size, error callback. */
static inline void
fuzz_disk_config (const struct fuzz_config *c, const struct pi_params *pp,
                  uint64_t nblocks, struct disk_config *cfg)
{
  memset (cfg, 0, sizeof *cfg);
  cfg->size = nblocks * c->interval;
  cfg->format = pp->format;
  cfg->interval = c->interval;
  cfg->has_app = c->has_app;
  cfg->app_tag = c->app_tag;
  cfg->app_mask = c->app_mask;
}

#endif /* STABLEDIF_FUZZ_DISK_H */
