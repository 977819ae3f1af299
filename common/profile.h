/* SPDX-License-Identifier: BSD-3-Clause */
/* stabledif: the device profile and its one-line text form
 * (stabledif(7), PROFILE).
 *
 *   stabledif/1 view=dif format=T10-DIF-TYPE1-CRC interval=512 tuple=8 stable_writes=1
 *
 * Space-separated; first token "stabledif/1"; then key=value.  Unknown keys
 * are ignored; a missing required key, a bad value or an inconsistent
 * profile (tuple size or stable_writes not matching the format) is an
 * error that names the token.  No I/O.
 */
#ifndef STABLEDIF_PROFILE_H
#define STABLEDIF_PROFILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pi.h"

/* The first token of every profile line. */
#define PROFILE_MAGIC "stabledif/1"

/* The largest profile line format writes, including the NUL. */
#define PROFILE_LINE_MAX 256

/* Which view of the disk an export is (stabledif(7), VIEWS). */
enum profile_view {
  PROFILE_VIEW_DATA = 0,        /* plain data, "" or "data" */
  PROFILE_VIEW_DIF = 1,         /* extended blocks, "dif" */
};

/* A parsed profile. */
struct profile {
  enum profile_view view;       /* which view this export is */
  const struct pi_format *format; /* PI format, never NULL once parsed */
  uint32_t interval;            /* protection interval, bytes */
  uint32_t tuple;               /* tuple size, bytes (format's) */
  bool stable_writes;           /* device checks host PI (format != none) */
  bool has_app;                 /* app tag/mask configured (key app_tag) */
  uint16_t app_tag;             /* configured app tag */
  uint16_t app_mask;            /* configured app mask */
};

/* "data" or "dif". */
const char *profile_view_name (enum profile_view v);

/* Map an NBD export name to a view: "" and "data" -> DATA, "dif" -> DIF.
 * Returns -1 for any other name. */
int profile_view_from_export (const char *name, enum profile_view *v);

/* Fill P for a device: tuple and stable_writes follow from the format. */
void profile_init (struct profile *p, enum profile_view view,
                   const struct pi_format *format, uint32_t interval);

/* Write the one-line form of P into BUF (LEN bytes, PROFILE_LINE_MAX is
 * always enough).  Returns the length written (excluding NUL), or -1 if
 * LEN is too small. */
int profile_format (const struct profile *p, char *buf, size_t len);

/* Parse LINE into P.  On error returns -1 and writes a message naming the
 * offending token into ERR (ERRLEN bytes); P is then unspecified. */
int profile_parse (const char *line, struct profile *p,
                   char *err, size_t errlen);

/* The pi_params that go with P. */
void profile_pi_params (const struct profile *p, struct pi_params *out);

#endif /* STABLEDIF_PROFILE_H */
