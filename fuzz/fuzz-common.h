/* SPDX-License-Identifier: BSD-3-Clause */
/* stabledif fuzz targets: what the targets share.
 *
 * A cursor over the fuzzer's input (reads past the end give zeros, so
 * every input is a valid program), the device configurations the targets
 * choose from with one input byte, a builder of extended blocks steered
 * by the input (valid, escaped, corrupted or raw PI), and a reference PI
 * check written independently of common/pi.c from the layout in
 * stabledif(7) PI FORMATS, against which the code under test is
 * compared.
 *
 * Every check failure calls fuzz_fail, which prints what went wrong and
 * aborts: that is what libFuzzer and the replay driver report.
 */
#ifndef STABLEDIF_FUZZ_COMMON_H
#define STABLEDIF_FUZZ_COMMON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pi.h"

/* The entry point every target defines (libFuzzer's contract). */
int LLVMFuzzerTestOneInput (const uint8_t *data, size_t size);

/* Print "fuzz: FILE:LINE: message" and abort. */
void fuzz_fail (const char *file, int line, const char *fmt, ...)
  __attribute__ ((format (printf, 3, 4), noreturn));

/* Abort with a message unless COND holds. */
#define FUZZ_ASSERT(cond, ...)                                  \
  do {                                                          \
    if (!(cond))                                                \
      fuzz_fail (__FILE__, __LINE__, __VA_ARGS__);              \
  } while (0)

/* The unread part of the input. */
struct fuzz_input {
  const uint8_t *p;             /* next byte */
  size_t len;                   /* bytes left */
};

/* The next byte, 16, 32 or 64 bits (little-endian) of the input; zeros
 * once it is used up. */
uint8_t fuzz_u8 (struct fuzz_input *in);
uint16_t fuzz_u16 (struct fuzz_input *in);
uint32_t fuzz_u32 (struct fuzz_input *in);
uint64_t fuzz_u64 (struct fuzz_input *in);

/* One device configuration a target can pick. */
struct fuzz_config {
  const char *format;           /* PI format name (pi_format_lookup) */
  uint32_t interval;            /* protection interval, bytes */
  bool has_app;                 /* app tag checked */
  uint16_t app_tag;             /* the app tag, if has_app */
  uint16_t app_mask;            /* its checked bits, if has_app */
};

/* The configuration chosen by byte B (every format, both intervals
 * where allowed, with and without an app tag). */
const struct fuzz_config *fuzz_config_pick (uint8_t b);

/* The pi_params of configuration C (the format must exist). */
void fuzz_config_params (const struct fuzz_config *c, struct pi_params *p);

/* Build NBLOCKS extended blocks for P at EXT (pi_ext_size(P) bytes each),
 * the first meant for LBA, steered by IN: each block's data is a
 * pseudo-random fill from a seed in the input, and its tuple is one of
 * valid, escaped (app tag all ones; ref all ones too for type 3),
 * valid but with one field or data bit changed, or raw input bytes. */
void fuzz_build_ext (const struct pi_params *p, struct fuzz_input *in,
                     uint8_t *ext, uint64_t nblocks, uint64_t lba);

/* The reference check of one block: DATA (p->interval bytes) against
 * the tuple at TUPLE for LBA, per stabledif(7) PI FORMATS.  Returns the first failing
 * check (guard, app, ref) with the wanted and found values in *EXPECTED
 * and *ACTUAL, or PI_CHECK_OK; *ESCAPED says whether the block escaped
 * checking.  Format none always passes. */
enum pi_check fuzz_ref_check (const struct pi_params *p, const uint8_t *data,
                              const uint8_t *tuple, uint64_t lba,
                              bool *escaped, uint64_t *expected,
                              uint64_t *actual);

#endif /* STABLEDIF_FUZZ_COMMON_H */
