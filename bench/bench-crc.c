/* SPDX-License-Identifier: BSD-3-Clause */
/* stabledif: bench-crc -- how fast PI verification and CRC-64/NVME are,
 * relative to isa-l on the same machine, same buffers, same run.
 *
 * Not a test (machines are noisy): it prints throughputs and ratios next
 * to the project's targets, and with --check exits 1 if a target is missed.
 *
 *   (a) guard verification: pi_verify_sep and pi_verify_ext with
 *       T10-DIF-TYPE1-CRC at 512- and 4096-byte intervals, against isa-l's
 *       crc16_t10dif called once per interval over the same data -- the
 *       least any verification must do.  Target: verify >= 0.8x raw.
 *       For information, against the same baseline: one isa-l call over
 *       the whole buffer, crc16_t10dif_blocks (all intervals in one call;
 *       the verify and generate loops use it) and pi_generate_sep.
 *   (b) CRC-64/NVME at 4 KiB: crc64_nvme (which runs the widest
 *       carry-less-multiply code the CPU has), and each implementation on
 *       its own, against isa-l's crc64_jones_refl (another reflected
 *       CRC-64, isa-l's best code for this CPU).  Target: crc64_nvme >=
 *       0.5x jones.
 *   (c) for information: copy and guards in one pass against a copy and
 *       a separate pass -- pi_verify_split_ext against pi_verify_ext then
 *       pi_split_ext (the client's read path), pi_generate_copy against
 *       memcpy then pi_generate_sep (a snapshot).
 *
 * Each figure is the best of several timed rounds, the candidates of one
 * comparison measured alternately so that a frequency change or a noisy
 * neighbour hits them alike.  See bench/README.md.
 */

#include <config.h>

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <isa-l/crc.h>
#include <isa-l/crc64.h>

#include "crc16.h"
#include "crc64.h"
#include "pi.h"

/* Targets (ratio to the isa-l baseline). */
#define TARGET_VERIFY 0.8
#define TARGET_CLMUL 0.5

/* Settings from the command line. */
struct options {
  size_t bytes;                 /* data bytes per buffer */
  unsigned rounds;              /* timed rounds per candidate */
  double round_secs;            /* minimum length of one round */
  bool check;                   /* exit 1 when a target is missed */
};

/* One thing being timed: FN processes the whole buffer once and returns a
 * value that depends on the result (so the work cannot be optimised out). */
struct candidate {
  const char *name;             /* printed */
  uint64_t (*fn) (void *ctx);   /* one pass */
  void *ctx;                    /* its buffers */
  double best;                  /* best throughput seen, bytes/s */
};

/* The buffers of one interval size. */
struct bufs {
  struct pi_params p;           /* format, interval */
  size_t nblocks;               /* blocks per buffer */
  uint8_t *data;                /* nblocks * interval, separate layout */
  uint8_t *pi;                  /* nblocks * tuple, separate layout */
  uint8_t *ext;                 /* nblocks * (interval + tuple) */
  uint16_t *guards;             /* nblocks CRC-16s (crc16_t10dif_blocks) */
  uint8_t *out;                 /* nblocks * interval: where (c) copies */
  uint8_t *out_pi;              /* nblocks * tuple: where (c) puts tuples */
};

static double
now (void)
{
  struct timespec ts;

  clock_gettime (CLOCK_MONOTONIC, &ts);
  return (double) ts.tv_sec + (double) ts.tv_nsec * 1e-9;
}

/* Keeps results alive. */
static volatile uint64_t sink;

/* Time one round of candidate C over BYTES bytes: repeat passes until
 * SECS have passed; record the throughput if it is the best so far. */
static void
time_round (struct candidate *c, size_t bytes, double secs)
{
  double t0 = now (), t;
  uint64_t passes = 0, acc = 0;

  do {
    acc ^= c->fn (c->ctx);
    passes++;
    t = now () - t0;
  } while (t < secs);
  sink ^= acc;
  if ((double) bytes * (double) passes / t > c->best)
    c->best = (double) bytes * (double) passes / t;
}

/* Measure the N candidates of one comparison, alternating. */
static void
measure (struct candidate *c, size_t n, size_t bytes,
         const struct options *o)
{
  unsigned r;
  size_t i;

  for (i = 0; i < n; i++) {     /* warm-up: caches, CPU dispatch, clocks */
    c[i].best = 0;
    time_round (&c[i], bytes, o->round_secs / 4);
    c[i].best = 0;
  }
  for (r = 0; r < o->rounds; r++)
    for (i = 0; i < n; i++)
      time_round (&c[i], bytes, o->round_secs);
}

/* ---- (a) guard verification ---- */

static uint64_t
raw_crc16_sep (void *ctx)
{
  const struct bufs *b = ctx;
  const uint32_t iv = b->p.interval;
  uint64_t acc = 0;
  size_t i;

  for (i = 0; i < b->nblocks; i++)
    acc += crc16_t10dif (0, b->data + i * iv, iv);
  return acc;
}

static uint64_t
raw_crc16_ext (void *ctx)
{
  const struct bufs *b = ctx;
  const uint32_t iv = b->p.interval;
  const size_t es = pi_ext_size (&b->p);
  uint64_t acc = 0;
  size_t i;

  for (i = 0; i < b->nblocks; i++)
    acc += crc16_t10dif (0, b->ext + i * es, iv);
  return acc;
}

static uint64_t
raw_crc16_whole (void *ctx)
{
  const struct bufs *b = ctx;

  return crc16_t10dif (0, b->data, (uint64_t) b->nblocks * b->p.interval);
}

/* The guards of all intervals in one crc16_t10dif_blocks call, summed. */
static uint64_t
blocks_sum (const struct bufs *b,
            void (*fn) (const void *, size_t, size_t, size_t, uint16_t *))
{
  uint64_t acc = 0;
  size_t i;

  fn (b->data, b->p.interval, b->p.interval, b->nblocks, b->guards);
  for (i = 0; i < b->nblocks; i++)
    acc += b->guards[i];
  return acc;
}

static uint64_t
blocks_crc16_sep (void *ctx)
{
  return blocks_sum (ctx, crc16_t10dif_blocks);
}

static uint64_t
blocks_clmul_crc16_sep (void *ctx)
{
  return blocks_sum (ctx, crc16_t10dif_blocks_clmul);
}

static uint64_t
verify_sep (void *ctx)
{
  const struct bufs *b = ctx;

  return pi_verify_sep (&b->p, b->data, b->pi, b->nblocks, 0,
                        NULL, NULL, NULL) + 1;
}

static uint64_t
verify_ext (void *ctx)
{
  const struct bufs *b = ctx;

  return pi_verify_ext (&b->p, b->ext, b->nblocks, 0, NULL, NULL, NULL) + 1;
}

static uint64_t
generate_sep (void *ctx)
{
  struct bufs *b = ctx;

  pi_generate_sep (&b->p, b->data, b->pi, b->nblocks, 0);
  return b->pi[0];
}

static uint64_t
raw_crc64_sep (void *ctx)
{
  const struct bufs *b = ctx;
  const uint32_t iv = b->p.interval;
  uint64_t acc = 0;
  size_t i;

  for (i = 0; i < b->nblocks; i++)
    acc += crc64_nvme (0, b->data + i * iv, iv);
  return acc;
}

static void *
xmalloc (size_t n)
{
  void *p = malloc (n);

  if (p == NULL) {
    perror ("bench-crc: malloc");
    exit (EXIT_FAILURE);
  }
  return p;
}

/* Random data with correct PI in both layouts. */
static void
bufs_init (struct bufs *b, const char *format, uint32_t interval,
           size_t bytes)
{
  size_t i;

  memset (b, 0, sizeof *b);
  b->p.format = pi_format_lookup (format);
  b->p.interval = interval;
  b->nblocks = bytes / interval;
  b->data = xmalloc (b->nblocks * interval);
  b->pi = xmalloc (b->nblocks * b->p.format->tuple_size);
  b->ext = xmalloc (b->nblocks * pi_ext_size (&b->p));
  b->guards = xmalloc (b->nblocks * sizeof *b->guards);
  b->out = xmalloc (b->nblocks * interval);
  b->out_pi = xmalloc (b->nblocks * b->p.format->tuple_size);
  srand (1);
  for (i = 0; i < b->nblocks * interval; i++)
    b->data[i] = (uint8_t) rand ();
  pi_generate_sep (&b->p, b->data, b->pi, b->nblocks, 0);
  pi_join_ext (&b->p, b->data, b->pi, b->ext, b->nblocks);
  if (pi_verify_sep (&b->p, b->data, b->pi, b->nblocks, 0,
                     NULL, NULL, NULL) != 0 ||
      pi_verify_ext (&b->p, b->ext, b->nblocks, 0, NULL, NULL, NULL) != 0) {
    fprintf (stderr, "bench-crc: generated PI does not verify\n");
    exit (EXIT_FAILURE);
  }
}

static void
bufs_free (struct bufs *b)
{
  free (b->data);
  free (b->pi);
  free (b->ext);
  free (b->guards);
  free (b->out);
  free (b->out_pi);
}

static double
gbs (double bytes_per_sec)
{
  return bytes_per_sec / 1e9;
}

/* Print one line: NAME, throughput, ratio to BASE, and target if any.
 * Returns false if a target was given and missed. */
static bool
report (const struct candidate *c, const struct candidate *base,
        double target)
{
  double ratio = c->best / base->best;
  bool ok = target <= 0 || ratio >= target;

  printf ("  %-34s %8.2f GB/s  %5.2fx %-22s", c->name, gbs (c->best),
          ratio, base == c ? "(baseline)" : "");
  if (target > 0)
    printf (" target >= %.1fx: %s", target, ok ? "met" : "MISSED");
  printf ("\n");
  return ok;
}

/* ---- (c) copy and guards (the client's read path and snapshots) ---- */

/* The read path before one pass: verify the extended buffer, then split
 * it into packed data and tuples. */
static uint64_t
verify_then_split (void *ctx)
{
  struct bufs *b = ctx;
  uint64_t r;

  r = pi_verify_ext (&b->p, b->ext, b->nblocks, 0, NULL, NULL, NULL);
  pi_split_ext (&b->p, b->ext, b->out, b->out_pi, b->nblocks);
  return r + b->out[0];
}

static uint64_t
verify_split (void *ctx)
{
  struct bufs *b = ctx;

  return pi_verify_split_ext (&b->p, b->ext, b->out, b->out_pi, b->nblocks,
                              0, NULL, NULL, NULL) + b->out[0];
}

/* A snapshot before one pass: copy, then generate over the copy. */
static uint64_t
copy_then_generate (void *ctx)
{
  struct bufs *b = ctx;

  memcpy (b->out, b->data, b->nblocks * b->p.interval);
  pi_generate_sep (&b->p, b->out, b->out_pi, b->nblocks, 0);
  return b->out_pi[0];
}

static uint64_t
generate_copy (void *ctx)
{
  struct bufs *b = ctx;

  pi_generate_copy (&b->p, b->data, b->out, b->p.interval, b->out_pi,
                    b->p.format->tuple_size, b->nblocks, 0);
  return b->out_pi[0];
}

static void
bench_copy (uint32_t interval, const struct options *o)
{
  struct bufs b;

  bufs_init (&b, "T10-DIF-TYPE1-CRC", interval, o->bytes);
  printf ("(c) T10-DIF-TYPE1-CRC copy and guards in one pass, interval %"
          PRIu32 ", %zu blocks (for information):\n", interval, b.nblocks);
  {
    struct candidate c[] = {
      { "pi_verify_ext + pi_split_ext", verify_then_split, &b, 0 },
      { "pi_verify_split_ext", verify_split, &b, 0 },
      { "memcpy + pi_generate_sep", copy_then_generate, &b, 0 },
      { "pi_generate_copy", generate_copy, &b, 0 },
    };
    measure (c, 4, b.nblocks * interval, o);
    report (&c[0], &c[0], 0);
    report (&c[1], &c[0], 0);
    report (&c[2], &c[2], 0);
    report (&c[3], &c[2], 0);
  }
  bufs_free (&b);
}

static bool
bench_verify (uint32_t interval, const struct options *o)
{
  struct bufs b;
  bool ok = true;

  bufs_init (&b, "T10-DIF-TYPE1-CRC", interval, o->bytes);
  printf ("(a) T10-DIF-TYPE1-CRC guard verification, interval %" PRIu32
          ", %zu blocks:\n", interval, b.nblocks);

  {
    struct candidate c[] = {
      { "isa-l crc16_t10dif per interval", raw_crc16_sep, &b, 0 },
      { "pi_verify_sep", verify_sep, &b, 0 },
    };
    measure (c, 2, b.nblocks * interval, o);
    report (&c[0], &c[0], 0);
    ok &= report (&c[1], &c[0], TARGET_VERIFY);
  }
  {
    struct candidate c[] = {
      { "isa-l crc16_t10dif, extended layout", raw_crc16_ext, &b, 0 },
      { "pi_verify_ext", verify_ext, &b, 0 },
    };
    measure (c, 2, b.nblocks * interval, o);
    report (&c[0], &c[0], 0);
    ok &= report (&c[1], &c[0], TARGET_VERIFY);
  }
  {
    /* For information: one call over the whole buffer, the CRCs of all
     * intervals in one call (crc16.c; dispatched, then the PCLMULQDQ
     * version alone), and generation. */
    struct candidate c[] = {
      { "isa-l crc16_t10dif per interval", raw_crc16_sep, &b, 0 },
      { "isa-l crc16_t10dif, one call", raw_crc16_whole, &b, 0 },
      { "crc16_t10dif_blocks", blocks_crc16_sep, &b, 0 },
      { "crc16_t10dif_blocks_clmul (SSE)", blocks_clmul_crc16_sep, &b, 0 },
      { "pi_generate_sep", generate_sep, &b, 0 },
    };
    size_t n = sizeof c / sizeof c[0], i;
    if (!crc16_t10dif_have_clmul ()) {
      c[3] = c[4];              /* no PCLMULQDQ: no SSE row */
      n--;
    }
    measure (c, n, b.nblocks * interval, o);
    for (i = 0; i < n; i++)
      report (&c[i], &c[0], 0);
  }
  bufs_free (&b);
  return ok;
}

static void
bench_verify_crc64 (const struct options *o)
{
  struct bufs b;

  bufs_init (&b, "EXT-DIF-TYPE1-CRC64", 4096, o->bytes);
  printf ("(a') EXT-DIF-TYPE1-CRC64 guard verification, interval 4096, "
          "%zu blocks (for information):\n", b.nblocks);
  {
    struct candidate c[] = {
      { "crc64_nvme per interval", raw_crc64_sep, &b, 0 },
      { "pi_verify_sep", verify_sep, &b, 0 },
      { "pi_verify_ext", verify_ext, &b, 0 },
    };
    measure (c, 3, b.nblocks * 4096, o);
    report (&c[0], &c[0], 0);
    report (&c[1], &c[0], 0);
    report (&c[2], &c[0], 0);
  }
  bufs_free (&b);
}

/* ---- (b) CRC-64 at 4 KiB ---- */

/* A buffer cut into 4 KiB pieces, each checksummed on its own. */
struct crc_bufs {
  const uint8_t *buf;           /* the data */
  size_t n4k;                   /* number of 4 KiB pieces */
};

#define CRC64_PASS(name, call)                                  \
  static uint64_t                                               \
  name (void *ctx)                                              \
  {                                                             \
    const struct crc_bufs *cb = ctx;                            \
    uint64_t acc = 0;                                           \
    size_t i;                                                   \
    for (i = 0; i < cb->n4k; i++)                               \
      acc += call (0, cb->buf + i * 4096, 4096);                \
    return acc;                                                 \
  }

CRC64_PASS (pass_jones, crc64_jones_refl)
CRC64_PASS (pass_clmul, crc64_nvme_clmul)
CRC64_PASS (pass_vpclmul, crc64_nvme_vpclmul)
CRC64_PASS (pass_table, crc64_nvme_table)
CRC64_PASS (pass_nvme, crc64_nvme)

static bool
bench_crc64 (const struct options *o)
{
  struct crc_bufs cb;
  uint8_t *buf;
  bool ok = true;
  size_t i;

  cb.n4k = o->bytes / 4096;
  buf = xmalloc (cb.n4k * 4096);
  for (i = 0; i < cb.n4k * 4096; i++)
    buf[i] = (uint8_t) (i * 131 + (i >> 9));
  cb.buf = buf;

  printf ("(b) CRC-64 over 4 KiB blocks, %zu blocks:\n", cb.n4k);
  if (!crc64_nvme_have_clmul ()) {
    printf ("  this CPU has no PCLMULQDQ: crc64_nvme uses the table\n");
    {
      struct candidate c[] = {
        { "isa-l crc64_jones_refl", pass_jones, &cb, 0 },
        { "crc64_nvme_table", pass_table, &cb, 0 },
      };
      measure (c, 2, cb.n4k * 4096, o);
      report (&c[0], &c[0], 0);
      report (&c[1], &c[0], 0);
    }
    free (buf);
    return true;
  }
  {
    /* The target applies to crc64_nvme, i.e. the widest folding code this
     * CPU runs; the others are shown for comparison. */
    struct candidate c[] = {
      { "isa-l crc64_jones_refl", pass_jones, &cb, 0 },
      { "crc64_nvme (dispatched)", pass_nvme, &cb, 0 },
      { "crc64_nvme_vpclmul (AVX-512)", pass_vpclmul, &cb, 0 },
      { "crc64_nvme_clmul (SSE)", pass_clmul, &cb, 0 },
      { "crc64_nvme_table", pass_table, &cb, 0 },
    };
    size_t n = sizeof c / sizeof c[0];
    if (!crc64_nvme_have_vpclmul ()) {
      printf ("  this CPU has no AVX-512 VPCLMULQDQ: crc64_nvme uses the "
              "SSE version\n");
      c[2] = c[3];
      c[3] = c[4];
      n--;
    }
    measure (c, n, cb.n4k * 4096, o);
    report (&c[0], &c[0], 0);
    ok &= report (&c[1], &c[0], TARGET_CLMUL);
    for (i = 2; i < n; i++)
      report (&c[i], &c[0], 0);
  }
  free (buf);
  return ok;
}

static void
usage (FILE *fp)
{
  fprintf (fp,
           "usage: bench-crc [--bytes N] [--rounds N] [--round-ms N] [--check]\n"
           "  --bytes N     data bytes per buffer (default 262144, a multiple"
           " of 4096)\n"
           "  --rounds N    timed rounds per candidate, best kept (default 5)\n"
           "  --round-ms N  minimum length of a round (default 200)\n"
           "  --check       exit 1 if a target is missed\n");
}

/* Parse a positive decimal number for option NAME. */
static unsigned long long
number (const char *name, const char *s)
{
  unsigned long long v;
  char *end;

  errno = 0;
  v = strtoull (s, &end, 10);
  if (errno != 0 || end == s || *end != '\0' || v == 0 || s[0] == '-') {
    fprintf (stderr, "bench-crc: %s: bad number '%s'\n", name, s);
    exit (2);
  }
  return v;
}

int
main (int argc, char *argv[])
{
  static const struct option longopts[] = {
    { "bytes", required_argument, NULL, 'b' },
    { "rounds", required_argument, NULL, 'r' },
    { "round-ms", required_argument, NULL, 'm' },
    { "check", no_argument, NULL, 'c' },
    { "help", no_argument, NULL, 'h' },
    { NULL, 0, NULL, 0 },
  };
  struct options o = {
    .bytes = 256 * 1024, .rounds = 5, .round_secs = 0.2, .check = false,
  };
  bool ok = true;
  int c;

  while ((c = getopt_long (argc, argv, "", longopts, NULL)) != -1) {
    switch (c) {
    case 'b':
      o.bytes = number ("--bytes", optarg);
      if (o.bytes % 4096 != 0 || o.bytes > (size_t) 1 << 32) {
        fprintf (stderr, "bench-crc: --bytes: must be a multiple of 4096 "
                 "up to 4 GiB\n");
        exit (2);
      }
      break;
    case 'r':
      o.rounds = (unsigned) number ("--rounds", optarg);
      break;
    case 'm':
      o.round_secs = (double) number ("--round-ms", optarg) / 1000;
      break;
    case 'c':
      o.check = true;
      break;
    case 'h':
      usage (stdout);
      exit (0);
    default:
      usage (stderr);
      exit (2);
    }
  }
  if (optind != argc) {
    usage (stderr);
    exit (2);
  }

  printf ("bench-crc: %zu bytes per buffer, best of %u rounds of %.0f ms; "
          "PCLMULQDQ %s, AVX-512 VPCLMULQDQ %s\n\n", o.bytes, o.rounds,
          o.round_secs * 1000, crc64_nvme_have_clmul () ? "yes" : "no",
          crc64_nvme_have_vpclmul () ? "yes" : "no");
  ok &= bench_verify (512, &o);
  ok &= bench_verify (4096, &o);
  bench_verify_crc64 (&o);
  ok &= bench_crc64 (&o);
  bench_copy (512, &o);
  bench_copy (4096, &o);
  printf ("\n%s\n", ok ? "all targets met" : "some targets MISSED");
  return o.check && !ok ? 1 : 0;
}
