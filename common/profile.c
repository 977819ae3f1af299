/* SPDX-License-Identifier: BSD-3-Clause */
/* stabledif: the device profile and its one-line text form (see profile.h).
 *
 * The parser works on the caller's string in place (pointer + length per
 * token), never writes to it, never copies more than a bounded excerpt of
 * a token into an error message, and accepts any bytes: it is meant to be
 * safe on whatever a server sends.
 */

#include <config.h>

#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "pi.h"
#include "profile.h"

const char *
profile_view_name (enum profile_view v)
{
  return v == PROFILE_VIEW_DIF ? "dif" : "data";
}

int
profile_view_from_export (const char *name, enum profile_view *v)
{
  if (name == NULL)
    return -1;
  if (strcmp (name, "") == 0 || strcmp (name, "data") == 0) {
    *v = PROFILE_VIEW_DATA;
    return 0;
  }
  if (strcmp (name, "dif") == 0) {
    *v = PROFILE_VIEW_DIF;
    return 0;
  }
  return -1;
}

void
profile_init (struct profile *p, enum profile_view view,
              const struct pi_format *format, uint32_t interval)
{
  memset (p, 0, sizeof *p);
  p->view = view;
  p->format = format;
  p->interval = interval;
  p->tuple = format->tuple_size;
  p->stable_writes = format->guard != PI_GUARD_NONE;
  p->has_app = false;
  p->app_tag = 0;
  p->app_mask = 0;
}

int
profile_format (const struct profile *p, char *buf, size_t len)
{
  const struct pi_format *f = p->format ? p->format : pi_format_none ();
  int n, m;

  if (buf == NULL || len == 0)
    return -1;
  n = snprintf (buf, len,
                "%s view=%s format=%s interval=%" PRIu32 " tuple=%" PRIu32
                " stable_writes=%d",
                PROFILE_MAGIC, profile_view_name (p->view), f->name,
                p->interval, p->tuple, p->stable_writes ? 1 : 0);
  if (n < 0 || (size_t) n >= len)
    return -1;
  if (p->has_app) {
    m = snprintf (buf + n, len - n, " app_tag=0x%04x/0x%04x",
                  (unsigned) p->app_tag, (unsigned) p->app_mask);
    if (m < 0 || (size_t) m >= len - n)
      return -1;
    n += m;
  }
  return n;
}

void
profile_pi_params (const struct profile *p, struct pi_params *out)
{
  memset (out, 0, sizeof *out);
  out->format = p->format ? p->format : pi_format_none ();
  out->interval = p->interval;
  out->check_app = p->has_app;
  out->app_tag = p->has_app ? p->app_tag : 0;
  out->app_mask = p->has_app ? p->app_mask : 0;
}

/* ---- parsing ---- */

/* One token of the line: LEN bytes at S, not NUL-terminated. */
struct token {
  const char *s;                /* first byte */
  size_t len;                   /* bytes */
};

/* The keys the parser knows; unknown ones are skipped. */
enum key {
  KEY_VIEW, KEY_FORMAT, KEY_INTERVAL, KEY_TUPLE, KEY_STABLE_WRITES,
  KEY_APP_TAG,
  NR_KEYS
};

static const char *const key_names[NR_KEYS] = {
  [KEY_VIEW] = "view",
  [KEY_FORMAT] = "format",
  [KEY_INTERVAL] = "interval",
  [KEY_TUPLE] = "tuple",
  [KEY_STABLE_WRITES] = "stable_writes",
  [KEY_APP_TAG] = "app_tag",
};

/* Whether KEY is required in every profile. */
static bool
key_required (enum key k)
{
  return k != KEY_APP_TAG;
}

/* Whether the LEN bytes at S equal the string WORD. */
static bool
token_is (const char *s, size_t len, const char *word)
{
  return strlen (word) == len && memcmp (s, word, len) == 0;
}

static bool
is_space (char c)
{
  return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

/* The longest excerpt of a token quoted in an error message. */
#define SHOW_MAX 64

/* Copy token T into OUT (at least SHOW_MAX + 4 bytes) for an error
 * message: at most SHOW_MAX bytes, non-printable bytes shown as '?',
 * "..." appended when cut. */
static void
show_token (struct token t, char *out)
{
  size_t i, n = t.len < SHOW_MAX ? t.len : SHOW_MAX;

  for (i = 0; i < n; i++) {
    unsigned char c = (unsigned char) t.s[i];
    out[i] = (c >= 0x20 && c < 0x7f) ? (char) c : '?';
  }
  if (n < t.len) {
    memcpy (out + n, "...", 3);
    n += 3;
  }
  out[n] = '\0';
}

/* Write an error message into ERR (ERRLEN bytes), if there is room. */
static void __attribute__ ((format (printf, 3, 4)))
set_error (char *err, size_t errlen, const char *fmt, ...)
{
  va_list ap;

  if (err == NULL || errlen == 0)
    return;
  va_start (ap, fmt);
  vsnprintf (err, errlen, fmt, ap);
  va_end (ap);
}

/* Parse a decimal unsigned number of LEN bytes at S, at most MAX.
 * Digits only: no sign, no spaces, no empty string. */
static bool
parse_decimal (const char *s, size_t len, uint64_t max, uint64_t *out)
{
  uint64_t v = 0;
  size_t i;

  if (len == 0)
    return false;
  for (i = 0; i < len; i++) {
    if (s[i] < '0' || s[i] > '9')
      return false;
    v = v * 10 + (uint64_t) (s[i] - '0');
    if (v > max)                /* checked every digit: no overflow */
      return false;
  }
  *out = v;
  return true;
}

/* Parse a 16-bit number: "0x" followed by 1-4 hex digits, or decimal. */
static bool
parse_u16 (const char *s, size_t len, uint16_t *out)
{
  uint64_t v = 0;
  size_t i;

  if (len > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
    s += 2;
    len -= 2;
    if (len > 4)
      return false;
    for (i = 0; i < len; i++) {
      char c = s[i];
      unsigned d;
      if (c >= '0' && c <= '9') d = (unsigned) (c - '0');
      else if (c >= 'a' && c <= 'f') d = (unsigned) (c - 'a' + 10);
      else if (c >= 'A' && c <= 'F') d = (unsigned) (c - 'A' + 10);
      else return false;
      v = (v << 4) | d;
    }
  }
  else if (!parse_decimal (s, len, 0xffff, &v))
    return false;
  *out = (uint16_t) v;
  return true;
}

/* Parse the value of KEY (LEN bytes at V) into P.  False if it is bad. */
static bool
parse_value (enum key key, const char *v, size_t len, struct profile *p)
{
  const struct pi_format *f;
  const char *slash;
  uint64_t n;
  size_t i;

  switch (key) {
  case KEY_VIEW:
    if (token_is (v, len, "data"))
      p->view = PROFILE_VIEW_DATA;
    else if (token_is (v, len, "dif"))
      p->view = PROFILE_VIEW_DIF;
    else
      return false;
    return true;

  case KEY_FORMAT:
    for (i = 0; (f = pi_format_at (i)) != NULL; i++) {
      if (token_is (v, len, f->name)) {
        p->format = f;
        return true;
      }
    }
    return false;

  case KEY_INTERVAL:
    /* Whether it suits the format is checked once the format is known. */
    if (!parse_decimal (v, len, UINT32_MAX, &n) ||
        !pi_interval_valid (pi_format_none (), (uint32_t) n, NULL))
      return false;
    p->interval = (uint32_t) n;
    return true;

  case KEY_TUPLE:
    if (!parse_decimal (v, len, PI_TUPLE_MAX, &n))
      return false;
    p->tuple = (uint32_t) n;
    return true;

  case KEY_STABLE_WRITES:
    if (token_is (v, len, "0"))
      p->stable_writes = false;
    else if (token_is (v, len, "1"))
      p->stable_writes = true;
    else
      return false;
    return true;

  case KEY_APP_TAG:
    /* VALUE[/MASK]; the mask defaults to all bits. */
    slash = memchr (v, '/', len);
    if (slash == NULL) {
      if (!parse_u16 (v, len, &p->app_tag))
        return false;
      p->app_mask = 0xffff;
    }
    else if (!parse_u16 (v, (size_t) (slash - v), &p->app_tag) ||
             !parse_u16 (slash + 1, len - (size_t) (slash - v) - 1,
                         &p->app_mask))
      return false;
    p->has_app = true;
    return true;

  case NR_KEYS:
    break;
  }
  return false;
}

int
profile_parse (const char *line, struct profile *p,
               char *err, size_t errlen)
{
  struct token tok, seen[NR_KEYS];
  bool have[NR_KEYS] = { false };
  char shown[SHOW_MAX + 4];
  const char *s = line, *eq;
  const char *why;
  bool first = true;
  size_t k;

  if (err && errlen > 0)
    err[0] = '\0';
  memset (p, 0, sizeof *p);
  p->format = pi_format_none ();
  memset (seen, 0, sizeof seen);

  if (line == NULL) {
    set_error (err, errlen, "profile: no profile");
    return -1;
  }

  for (;;) {
    while (*s && is_space (*s))
      s++;
    if (*s == '\0')
      break;
    tok.s = s;
    while (*s && !is_space (*s))
      s++;
    tok.len = (size_t) (s - tok.s);

    if (first) {
      if (!token_is (tok.s, tok.len, PROFILE_MAGIC)) {
        show_token (tok, shown);
        set_error (err, errlen,
                   "profile: first token '%s' is not '" PROFILE_MAGIC "'",
                   shown);
        return -1;
      }
      first = false;
      continue;
    }

    eq = memchr (tok.s, '=', tok.len);
    if (eq == NULL || eq == tok.s) {
      show_token (tok, shown);
      set_error (err, errlen, "profile: bad token '%s' (expected key=value)",
                 shown);
      return -1;
    }
    for (k = 0; k < NR_KEYS; k++)
      if (token_is (tok.s, (size_t) (eq - tok.s), key_names[k]))
        break;
    if (k == NR_KEYS)
      continue;                 /* unknown key: ignored */
    if (have[k]) {
      show_token (tok, shown);
      set_error (err, errlen, "profile: duplicate key '%s' in '%s'",
                 key_names[k], shown);
      return -1;
    }
    if (!parse_value ((enum key) k, eq + 1, tok.len - (size_t) (eq - tok.s) - 1,
                      p)) {
      show_token (tok, shown);
      set_error (err, errlen, "profile: bad value in '%s'", shown);
      return -1;
    }
    have[k] = true;
    seen[k] = tok;
  }

  if (first) {
    set_error (err, errlen,
               "profile: empty profile (expected '" PROFILE_MAGIC " ...')");
    return -1;
  }
  for (k = 0; k < NR_KEYS; k++) {
    if (key_required ((enum key) k) && !have[k]) {
      set_error (err, errlen, "profile: missing required key '%s'",
                 key_names[k]);
      return -1;
    }
  }

  /* Consistency of the values with the format. */
  if (!pi_interval_valid (p->format, p->interval, &why)) {
    show_token (seen[KEY_INTERVAL], shown);
    set_error (err, errlen, "profile: %s does not suit format %s: %s",
               shown, p->format->name, why);
    return -1;
  }
  if (p->tuple != p->format->tuple_size) {
    show_token (seen[KEY_TUPLE], shown);
    set_error (err, errlen, "profile: %s does not match format %s (%u)",
               shown, p->format->name, p->format->tuple_size);
    return -1;
  }
  if (p->stable_writes != (p->format->guard != PI_GUARD_NONE)) {
    show_token (seen[KEY_STABLE_WRITES], shown);
    if (p->stable_writes)
      set_error (err, errlen,
                 "profile: %s but format %s has no PI to check",
                 shown, p->format->name);
    else
      set_error (err, errlen, "profile: %s but format %s checks PI",
                 shown, p->format->name);
    return -1;
  }
  if (p->has_app && p->format->guard == PI_GUARD_NONE) {
    show_token (seen[KEY_APP_TAG], shown);
    set_error (err, errlen, "profile: %s but format %s has no app tag",
               shown, p->format->name);
    return -1;
  }
  return 0;
}
