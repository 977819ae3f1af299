/* SPDX-License-Identifier: BSD-3-Clause */
/* stabledif: rebuilding the PI of the file store's dirty regions after a
 * crash.  See store-file-recover.h for the rule. */
#include <config.h>

#include "store-file-recover.h"

/* Rebuild the tuple at T of the block at DATA, LBA: the guard of the
 * data, the ref tag of the LBA where the format checks it, the app tag
 * kept. */
static void
recover_rebuild (const struct pi_format *f, uint32_t interval,
                 uint64_t lba, const uint8_t *data, uint8_t *t)
{
  struct pi_tuple pt;

  pi_tuple_decode (f, t, &pt);
  pt.guard = pi_guard_compute (f, data, interval);
  if (f->type != PI_TYPE_3)
    pt.ref = pi_ref_for_lba (f, lba);
  pi_tuple_encode (f, &pt, t);
}

uint64_t
store_file_recover_blocks (const struct pi_format *f, uint32_t interval,
                           uint64_t lba, uint64_t nblocks,
                           const uint8_t *data, uint8_t *tuples)
{
  const struct pi_params p = { .format = f, .interval = interval };
  const unsigned ts = f->tuple_size;
  uint64_t fixed = 0;

  if (ts == 0)
    return 0;
  for (uint64_t i = 0; i < nblocks; i++) {
    const uint8_t *d = data + i * interval;
    uint8_t *t = tuples + i * ts;

    if (pi_verify_block (&p, d, t, lba + i, NULL, NULL) == PI_CHECK_OK)
      continue;
    recover_rebuild (f, interval, lba + i, d, t);
    fixed++;
  }
  return fixed;
}
