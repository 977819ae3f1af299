/* SPDX-License-Identifier: BSD-3-Clause */
/* stabledif: rebuilding the PI of the file store's dirty regions after a
 * crash (nbdkit-stabledif-plugin(1), FILE STORAGE, Crashes).
 *
 * A block of a dirty region (store-file-log.h) whose stored tuple does
 * not verify against its stored data lost the race between PATH and
 * PATH.pi when the power went: the data on disk is its old or its new
 * contents, the tuple belongs to the other.  Its tuple is rebuilt for the
 * data: the guard of the data, the ref tag of its LBA (Types 1 and 2;
 * Type 3 keeps the stored one, which is not checked), and the stored
 * tuple's app tag.  Keeping the app tag is right whenever the old and
 * the new write carried the same one, as every data-view write does (the
 * device inserts app-tag= or 0); a dif-view client that changed a
 * block's app tag may find the old one after a crash, as it may find the
 * old data.  Blocks whose tuple verifies or escapes are left alone.  No
 * I/O here.
 */
#ifndef STABLEDIF_STORE_FILE_RECOVER_H
#define STABLEDIF_STORE_FILE_RECOVER_H

#include <stdint.h>

#include "pi.h"

/* NBLOCKS blocks from LBA of format F with INTERVAL bytes each: their
 * data at DATA, their tuples at TUPLES (as the host sees them, not in
 * the stored, bit-inverted form of PATH.pi).  Rebuild, in TUPLES, every
 * tuple that fails its guard or ref check.  Returns how many were
 * rebuilt. */
uint64_t store_file_recover_blocks (const struct pi_format *f,
                                    uint32_t interval, uint64_t lba,
                                    uint64_t nblocks, const uint8_t *data,
                                    uint8_t *tuples);

#endif /* STABLEDIF_STORE_FILE_RECOVER_H */
