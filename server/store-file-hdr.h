/* SPDX-License-Identifier: BSD-3-Clause */
/* stabledif: the geometry header of the file store's PATH.pi.
 *
 * PATH.pi starts with a small text header that records the shape of the
 * disk the files hold, so that reopening them with other parameters is
 * refused instead of silently misreading them:
 *
 *   stabledif-pi/1
 *   format=T10-DIF-TYPE1-CRC
 *   interval=512
 *   tuple=8
 *   size=1073741824
 *   tuples-at=4096
 *   encoding=inverted
 *
 * one key=value per line, NUL-padded to STORE_FILE_HDR_SIZE bytes; the
 * tuples follow at that offset, stored bit-inverted.  Text so that
 * "head -c 4096 PATH.pi" tells a human what the file is.  Unknown keys
 * are ignored (later versions may add some); a different first line is a
 * different, incompatible layout.  No I/O here.
 */
#ifndef STABLEDIF_STORE_FILE_HDR_H
#define STABLEDIF_STORE_FILE_HDR_H

#include <stddef.h>
#include <stdint.h>

#include "store.h"

/* Bytes of the header; the tuple of block LBA is at this offset plus
 * LBA * tuple size. */
#define STORE_FILE_HDR_SIZE 4096

/* The first line of the header (layout version 1). */
#define STORE_FILE_HDR_MAGIC "stabledif-pi/1"

/* The longest format name a header can record, including the NUL. */
#define STORE_FILE_HDR_FORMAT_MAX 64

/* The longest size string store_file_hdr_size_str writes, with NUL. */
#define STORE_FILE_SIZE_STR_MAX 24

/* The geometry a header records. */
struct store_file_hdr {
  char format[STORE_FILE_HDR_FORMAT_MAX]; /* PI format name as recorded */
  uint32_t interval;            /* protection interval, bytes */
  uint32_t tuple;               /* tuple size, bytes */
  uint64_t size;                /* data bytes: nblocks * interval */
};

/* The header describing geometry G. */
void store_file_hdr_from_geometry (const struct store_geometry *g,
                                   struct store_file_hdr *h);

/* Write the header text of H into BUF, NUL-padded to LEN bytes (LEN is
 * normally STORE_FILE_HDR_SIZE).  Returns -1 if it does not fit. */
int store_file_hdr_format (const struct store_file_hdr *h, char *buf,
                           size_t len);

/* Parse the LEN bytes at BUF into H.  On error returns -1 and writes what
 * is wrong (missing magic, a missing or bad key) into ERR (ERRLEN bytes);
 * H is then unspecified. */
int store_file_hdr_parse (const char *buf, size_t len,
                          struct store_file_hdr *h,
                          char *err, size_t errlen);

/* Compare a recorded header HAVE with the wanted one WANT.  Returns 0 if
 * they describe the same disk; else 1, with the names of the fields that
 * differ ("size", "format", "interval", "tuple"), comma-separated, in
 * WHAT (WHATLEN bytes). */
int store_file_hdr_diff (const struct store_file_hdr *have,
                         const struct store_file_hdr *want,
                         char *what, size_t whatlen);

/* Write H as "size=1G format=NAME interval=512" (the parameters a user
 * would give) into BUF (LEN bytes); truncated if LEN is too small. */
void store_file_hdr_describe (const struct store_file_hdr *h, char *buf,
                              size_t len);

/* SIZE in the shortest form nbdkit parses back exactly: "16T", "1G",
 * "1536K", else plain bytes.  BUF holds STORE_FILE_SIZE_STR_MAX bytes. */
void store_file_hdr_size_str (uint64_t size, char *buf);

#endif /* STABLEDIF_STORE_FILE_HDR_H */
