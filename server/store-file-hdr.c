/* SPDX-License-Identifier: BSD-3-Clause */
/* stabledif: the geometry header of the file store's PATH.pi.
 * See store-file-hdr.h for the layout. */
#include <config.h>

#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store-file-hdr.h"

void
store_file_hdr_from_geometry (const struct store_geometry *g,
                              struct store_file_hdr *h)
{
  memset (h, 0, sizeof *h);
  snprintf (h->format, sizeof h->format, "%s", g->format->name);
  h->interval = g->interval;
  h->tuple = g->format->tuple_size;
  h->size = g->nblocks * g->interval;
}

int
store_file_hdr_format (const struct store_file_hdr *h, char *buf, size_t len)
{
  int n;

  n = snprintf (buf, len,
                STORE_FILE_HDR_MAGIC "\n"
                "format=%s\n"
                "interval=%" PRIu32 "\n"
                "tuple=%" PRIu32 "\n"
                "size=%" PRIu64 "\n"
                "tuples-at=%d\n"
                "encoding=inverted\n",
                h->format, h->interval, h->tuple, h->size,
                STORE_FILE_HDR_SIZE);
  /* Keep at least one NUL after the text so a reader finds its end. */
  if (n < 0 || (size_t) n >= len)
    return -1;
  memset (buf + n, 0, len - n);
  return 0;
}

/* Parse the decimal number VAL (of key KEY) into *OUT, at most MAX. */
static int
parse_number (const char *key, const char *val, uint64_t max, uint64_t *out,
              char *err, size_t errlen)
{
  char *end;
  unsigned long long v;

  if (*val < '0' || *val > '9') {
    snprintf (err, errlen, "%s=%s is not a number", key, val);
    return -1;
  }
  errno = 0;
  v = strtoull (val, &end, 10);
  if (errno != 0 || *end != '\0' || v > max) {
    snprintf (err, errlen, "%s=%s is not a valid value", key, val);
    return -1;
  }
  *out = v;
  return 0;
}

int
store_file_hdr_parse (const char *buf, size_t len, struct store_file_hdr *h,
                      char *err, size_t errlen)
{
  char text[STORE_FILE_HDR_SIZE + 1];
  size_t n;
  char *line, *next;
  bool have_format = false, have_interval = false, have_tuple = false;
  bool have_size = false, have_at = false, have_encoding = false;
  uint64_t v;

  memset (h, 0, sizeof *h);

  /* The text ends at the first NUL (or at LEN, or at the header size). */
  n = strnlen (buf, len < STORE_FILE_HDR_SIZE ? len : STORE_FILE_HDR_SIZE);
  memcpy (text, buf, n);
  text[n] = '\0';

  next = strchr (text, '\n');
  if (next == NULL || (size_t) (next - text) != strlen (STORE_FILE_HDR_MAGIC)
      || memcmp (text, STORE_FILE_HDR_MAGIC,
                 strlen (STORE_FILE_HDR_MAGIC)) != 0) {
    snprintf (err, errlen,
              "it does not start with \"" STORE_FILE_HDR_MAGIC "\" "
              "(not a stabledif PI file, or a layout this version "
              "does not know)");
    return -1;
  }
  next++;

  while (*next != '\0') {
    char *eq, *key, *val;

    line = next;
    next = strchr (line, '\n');
    if (next == NULL) {
      snprintf (err, errlen, "the last line is not terminated (truncated?)");
      return -1;
    }
    *next++ = '\0';

    eq = strchr (line, '=');
    if (eq == NULL) {
      snprintf (err, errlen, "line \"%.40s\" is not key=value", line);
      return -1;
    }
    *eq = '\0';
    key = line;
    val = eq + 1;

    if (strcmp (key, "format") == 0) {
      if (*val == '\0' || strlen (val) >= sizeof h->format) {
        snprintf (err, errlen, "format=%.40s is not a valid format name",
                  val);
        return -1;
      }
      strcpy (h->format, val);
      have_format = true;
    }
    else if (strcmp (key, "interval") == 0) {
      if (parse_number (key, val, UINT32_MAX, &v, err, errlen) == -1)
        return -1;
      h->interval = v;
      have_interval = true;
    }
    else if (strcmp (key, "tuple") == 0) {
      if (parse_number (key, val, PI_TUPLE_MAX, &v, err, errlen) == -1)
        return -1;
      h->tuple = v;
      have_tuple = true;
    }
    else if (strcmp (key, "size") == 0) {
      if (parse_number (key, val, INT64_MAX, &v, err, errlen) == -1)
        return -1;
      h->size = v;
      have_size = true;
    }
    else if (strcmp (key, "tuples-at") == 0) {
      if (parse_number (key, val, UINT32_MAX, &v, err, errlen) == -1)
        return -1;
      if (v != STORE_FILE_HDR_SIZE) {
        snprintf (err, errlen, "tuples-at=%s: only %d is supported",
                  val, STORE_FILE_HDR_SIZE);
        return -1;
      }
      have_at = true;
    }
    else if (strcmp (key, "encoding") == 0) {
      if (strcmp (val, "inverted") != 0) {
        snprintf (err, errlen, "encoding=%.40s: only \"inverted\" is "
                  "supported", val);
        return -1;
      }
      have_encoding = true;
    }
    /* Any other key: ignored (added by a later compatible version). */
  }

  if (!have_format || !have_interval || !have_tuple || !have_size
      || !have_at || !have_encoding) {
    snprintf (err, errlen, "key %s= is missing",
              !have_format ? "format" : !have_interval ? "interval"
              : !have_tuple ? "tuple" : !have_size ? "size"
              : !have_at ? "tuples-at" : "encoding");
    return -1;
  }
  if (h->interval == 0 || h->size % h->interval != 0) {
    snprintf (err, errlen, "size=%" PRIu64 " is not a multiple of "
              "interval=%" PRIu32, h->size, h->interval);
    return -1;
  }
  return 0;
}

/* Append NAME to the comma-separated list in WHAT. */
static void
add_name (char *what, size_t whatlen, const char *name)
{
  size_t n = strlen (what);

  snprintf (what + n, whatlen - n, "%s%s", n > 0 ? ", " : "", name);
}

int
store_file_hdr_diff (const struct store_file_hdr *have,
                     const struct store_file_hdr *want,
                     char *what, size_t whatlen)
{
  if (whatlen > 0)
    what[0] = '\0';
  if (have->size != want->size)
    add_name (what, whatlen, "size");
  if (strcmp (have->format, want->format) != 0)
    add_name (what, whatlen, "format");
  if (have->interval != want->interval)
    add_name (what, whatlen, "interval");
  /* The tuple size follows from the format, but check it too: a header
   * whose tuple disagrees with its own format name is not ours. */
  if (have->tuple != want->tuple)
    add_name (what, whatlen, "tuple");
  return whatlen > 0 && what[0] != '\0';
}

void
store_file_hdr_describe (const struct store_file_hdr *h, char *buf,
                         size_t len)
{
  char size[STORE_FILE_SIZE_STR_MAX];

  store_file_hdr_size_str (h->size, size);
  snprintf (buf, len, "size=%s format=%s interval=%" PRIu32,
            size, h->format, h->interval);
}

void
store_file_hdr_size_str (uint64_t size, char *buf)
{
  static const char suffix[] = "EPTGMK";
  unsigned shift = 60;

  for (size_t i = 0; i < sizeof suffix - 1; i++, shift -= 10) {
    uint64_t unit = UINT64_C (1) << shift;

    if (size >= unit && size % unit == 0) {
      snprintf (buf, STORE_FILE_SIZE_STR_MAX, "%" PRIu64 "%c",
                size / unit, suffix[i]);
      return;
    }
  }
  snprintf (buf, STORE_FILE_SIZE_STR_MAX, "%" PRIu64, size);
}
