/* SPDX-License-Identifier: BSD-3-Clause */
/* stabledif-bench: the latency plot, a self-contained SVG file.
 *
 * Three panels side by side -- Write, Writeback, Flush -- each with one
 * curve per policy: the fraction of operations slower than a latency
 * (the complementary CDF), both axes logarithmic, so the tails that a
 * waiting policy grows stand out.  Each curve ends with a dot at its
 * maximum.  Drawn from the histograms (bucket tops, about 3% wide).
 * A fourth panel has one bar per run: the writes the device rejected
 * (the client's count of changed writes without a control socket), the
 * corruption that a policy lets through.  The legend below names each
 * run with its slowest write.
 */
#include <config.h>

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "stabledif-bench.h"

/* Geometry of one panel (pixels). */
#define PANEL_W 360             /* panel width including margins */
#define PANEL_H 380             /* panel height including margins */
#define MARGIN_L 74             /* left margin: y labels */
#define MARGIN_R 14
#define MARGIN_T 30             /* panel title */
#define MARGIN_B 48             /* x labels and axis title */
#define TOP 56                  /* document title above the panels */
#define CORR_W 340              /* the corruption panel's width */
#define CORR_L 96               /* its left margin: run names */
#define CORR_R 92               /* its right margin: counts past a bar */
#define LEGEND_H 34             /* legend below the panels: one row */
#define LEGEND_ROW 18           /* each further row of the legend */
#define LEGEND_SWATCH 30        /* legend: line and gap before the text */
#define LEGEND_GAP 24           /* legend: space after an entry's text */
#define CHAR_W 7.0              /* an upper bound of a 12px character's
                                   width (sans-serif, ASCII) */

/* Colours by policy (enum stabledif_policy). */
static const char *const colours[] = {
  "#1f77b4",                    /* auto */
  "#d62728",                    /* wait */
  "#ff7f0e",                    /* wait-sent */
  "#2ca02c",                    /* snapshot */
  "#9467bd",                    /* none */
};

static const char *
colour (int policy)
{
  if (policy < 0 || (size_t) policy >= sizeof colours / sizeof colours[0])
    return "#000000";
  return colours[policy];
}

/* Print S with XML's special characters escaped. */
static void
xml_text (FILE *fp, const char *s)
{
  for (; *s; s++)
    switch (*s) {
    case '<': fputs ("&lt;", fp); break;
    case '>': fputs ("&gt;", fp); break;
    case '&': fputs ("&amp;", fp); break;
    case '"': fputs ("&quot;", fp); break;
    case '\'': fputs ("&apos;", fp); break;
    default:
      /* Control characters are not allowed in XML 1.0. */
      if ((unsigned char) *s < 0x20 && *s != '\t' && *s != '\n')
        fputc ('?', fp);
      else
        fputc (*s, fp);
    }
}

/* The histogram of operation OP (0 write, 1 writeback, 2 flush). */
static const struct hist *
op_hist (const struct policy_result *p, int op)
{
  switch (op) {
  case 0: return &p->model.write;
  case 1: return &p->model.writeback;
  default: return &p->model.flush;
  }
}

/* One panel's axes: decades of milliseconds and of fractions. */
struct axes {
  double x0, y0, w, h;          /* plot area in pixels */
  int xlo, xhi;                 /* log10 of the x range, ms */
  int ylo;                      /* log10 of the smallest fraction (< 0) */
};

static double
ax_x (const struct axes *a, double ms)
{
  double l = ms > 0 ? log10 (ms) : a->xlo;

  if (l < a->xlo)
    l = a->xlo;
  if (l > a->xhi)
    l = a->xhi;
  return a->x0 + (l - a->xlo) / (a->xhi - a->xlo) * a->w;
}

static double
ax_y (const struct axes *a, double frac)
{
  double l = frac > 0 ? log10 (frac) : a->ylo;

  if (l < a->ylo)
    l = a->ylo;
  if (l > 0)
    l = 0;
  return a->y0 + (0 - l) / (0 - a->ylo) * a->h;
}

/* Ranges covering every run's operations OP. */
static void
axes_fit (struct axes *a, const struct bench_results *r, int op)
{
  double lo = INFINITY, hi = 0;
  uint64_t n = 1;
  size_t i;

  for (i = 0; i < r->nruns; i++) {
    const struct hist *h = op_hist (&r->runs[i], op);
    if (h->count == 0)
      continue;
    if ((double) h->min / 1e6 < lo)
      lo = (double) h->min / 1e6;
    if ((double) h->max / 1e6 > hi)
      hi = (double) h->max / 1e6;
    if (h->count > n)
      n = h->count;
  }
  if (!(hi > 0)) {
    lo = 0.001;
    hi = 1;
  }
  if (!(lo > 0) || lo < 1e-4)
    lo = 1e-4;                  /* 100 ns: below that is clock noise */
  a->xlo = (int) floor (log10 (lo));
  a->xhi = (int) ceil (log10 (hi));
  if (a->xhi <= a->xlo)
    a->xhi = a->xlo + 1;
  a->ylo = -(int) ceil (log10 ((double) n));
  if (a->ylo > -1)
    a->ylo = -1;
}

/* The label of 10^E milliseconds. */
static void
ms_label (char *buf, size_t len, int e)
{
  if (e >= 3)
    snprintf (buf, len, "%.0f s", pow (10, e - 3));
  else if (e >= 0)
    snprintf (buf, len, "%.0f ms", pow (10, e));
  else if (e >= -3)
    snprintf (buf, len, "%.0f µs", pow (10, e + 3));
  else
    snprintf (buf, len, "%.0f ns", pow (10, e + 6));
}

/* The label of a fraction of 10^E (E <= 0), as a percentage for every
 * E: 100%, 10%, 1%, 0.1%, 0.01% ... */
static void
frac_label (char *buf, size_t len, int e)
{
  int decimals = e < -2 ? -2 - e : 0;

  snprintf (buf, len, "%.*f%%", decimals, pow (10, e + 2));
}

static void
panel_axes (FILE *fp, const struct axes *a, const char *title)
{
  char lab[32];
  int e;

  fprintf (fp, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" "
           "fill=\"#ffffff\" stroke=\"#444444\"/>\n", a->x0, a->y0, a->w,
           a->h);
  fprintf (fp, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\" "
           "font-size=\"14\" font-weight=\"bold\">", a->x0 + a->w / 2,
           a->y0 - 10);
  xml_text (fp, title);
  fputs ("</text>\n", fp);

  for (e = a->xlo; e <= a->xhi; e++) {
    double x = ax_x (a, pow (10, e));
    ms_label (lab, sizeof lab, e);
    fprintf (fp, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" "
             "stroke=\"#dddddd\"/>\n", x, a->y0, x, a->y0 + a->h);
    fprintf (fp, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\" "
             "font-size=\"11\">%s</text>\n", x, a->y0 + a->h + 15, lab);
  }
  for (e = a->ylo; e <= 0; e++) {
    double y = ax_y (a, pow (10, e));
    frac_label (lab, sizeof lab, e);
    fprintf (fp, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" "
             "stroke=\"#dddddd\"/>\n", a->x0, y, a->x0 + a->w, y);
    fprintf (fp, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\" "
             "font-size=\"11\">%s</text>\n", a->x0 - 5, y + 4, lab);
  }
  fprintf (fp, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\" "
           "font-size=\"12\">latency (log)</text>\n", a->x0 + a->w / 2,
           a->y0 + a->h + 34);
  fprintf (fp, "<text transform=\"translate(%.1f,%.1f) rotate(-90)\" "
           "text-anchor=\"middle\" font-size=\"12\">operations slower "
           "(log)</text>\n", a->x0 - 60, a->y0 + a->h / 2);
}

/* The curve of one run. */
static void
curve (FILE *fp, const struct axes *a, const struct hist *h, int policy)
{
  uint64_t below = 0;
  unsigned i;
  const char *c = colour (policy);

  if (h->count == 0)
    return;
  fprintf (fp, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"2\" "
           "points=\"%.1f,%.1f", c, ax_x (a, (double) h->min / 1e6),
           ax_y (a, 1.0));
  for (i = 0; i < HIST_BUCKETS; i++) {
    uint64_t top;
    double x;

    if (h->bucket[i] == 0)
      continue;
    top = hist_bucket_high (i);
    if (top > h->max)
      top = h->max;
    x = ax_x (a, (double) top / 1e6);
    /* Step: at the bucket top, the fraction above drops. */
    fprintf (fp, " %.1f,%.1f", x,
             ax_y (a, (double) (h->count - below) / (double) h->count));
    below += h->bucket[i];
    fprintf (fp, " %.1f,%.1f", x,
             ax_y (a, (double) (h->count - below) / (double) h->count));
  }
  fputs ("\"/>\n", fp);
  fprintf (fp, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3.5\" fill=\"%s\"/>\n",
           ax_x (a, (double) h->max / 1e6),
           ax_y (a, 1.0 / (double) h->count), c);
}

/* The name of run P as the plot shows it: "auto (wait)" when the policy
 * in effect differs from the one asked for.  Returns BUF. */
static char *
run_name (char *buf, size_t len, const struct policy_result *p)
{
  const char *name = stabledif_policy_name ((enum stabledif_policy)
                                            p->policy);
  const char *eff = stabledif_policy_name ((enum stabledif_policy)
                                           p->effective);

  if (p->effective != p->policy && eff)
    snprintf (buf, len, "%s (%s)", name ? name : "?", eff);
  else
    snprintf (buf, len, "%s", name ? name : "?");
  return buf;
}

/* The corruption of run P that the plot shows: what the device
 * rejected, or without a control socket what the client saw change. */
static uint64_t
corrupted (const struct policy_result *p)
{
  return p->have_device ? report_device_corruption (p)
                        : report_client_corruption (p);
}

/* The fourth panel, its plot area at X0, Y0 (W by H): one bar per run
 * of the writes corrupted, with the count and its share of the page
 * writes past the bar.  Grouped as <g id="corruption">, one <rect> per
 * run (zero-width for none). */
static void
corruption_panel (FILE *fp, const struct bench_results *r, double x0,
                  double y0, double w, double h)
{
  uint64_t most = 1;
  double row;
  char name[64];
  size_t i;
  bool device = r->nruns > 0;

  for (i = 0; i < r->nruns; i++) {
    if (corrupted (&r->runs[i]) > most)
      most = corrupted (&r->runs[i]);
    device = device && r->runs[i].have_device;
  }
  row = r->nruns > 0 ? h / (double) r->nruns : h;
  if (row > 40)
    row = 40;

  fputs ("<g id=\"corruption\">\n", fp);
  fprintf (fp, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" "
           "fill=\"#ffffff\" stroke=\"#444444\"/>\n", x0, y0, w, h);
  fprintf (fp, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\" "
           "font-size=\"14\" font-weight=\"bold\">Corrupted writes</text>\n",
           x0 + w / 2, y0 - 10);
  for (i = 0; i < r->nruns; i++) {
    const struct policy_result *p = &r->runs[i];
    uint64_t n = corrupted (p);
    uint64_t writes = p->model.writeback.count;
    double y = y0 + 8 + (double) i * row;
    double bar = (w - CORR_R) * (double) n / (double) most;

    fprintf (fp, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\" "
             "font-size=\"12\">", x0 - 6, y + row * 0.3 + 4);
    xml_text (fp, run_name (name, sizeof name, p));
    fputs ("</text>\n", fp);
    fprintf (fp, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" "
             "height=\"%.1f\" fill=\"%s\"/>\n", x0, y, bar, row * 0.6,
             colour (p->policy));
    fprintf (fp, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"12\"%s>%"
             PRIu64 "</text>\n", x0 + bar + 5, y + row * 0.3 + 4,
             n ? " font-weight=\"bold\"" : "", n);
    if (n && writes)
      fprintf (fp, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"10\" "
               "fill=\"#555555\">%.2g%% of writes</text>\n", x0 + bar + 5,
               y + row * 0.3 + 16, 100.0 * (double) n / (double) writes);
  }
  fprintf (fp, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\" "
           "font-size=\"12\">%s</text>\n", x0 + w / 2, y0 + h + 15,
           device ? "page writes the device rejected"
                  : "page writes changed after the checksum");
  fprintf (fp, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\" "
           "font-size=\"12\">%s</text>\n", x0 + w / 2, y0 + h + 34,
           device ? "(their PI check failed)" : "(seen by the client)");
  fputs ("</g>\n", fp);
}

/* The width of the widest legend entry of R, text and swatch. */
static double
legend_col (const struct bench_results *r)
{
  char name[64], text[128];
  double col = 0;
  size_t i;

  for (i = 0; i < r->nruns; i++) {
    const struct policy_result *p = &r->runs[i];
    int n = snprintf (text, sizeof text, "%s: write max %.1f ms",
                      run_name (name, sizeof name, p),
                      (double) p->model.write.max / 1e6);
    double wd = LEGEND_SWATCH + CHAR_W * (n > 0 ? n : 0) + LEGEND_GAP;
    if (wd > col)
      col = wd;
  }
  return col;
}

/* The legend below the panels: entries of width COL, PER_ROW to a row
 * starting at Y. */
static void
legend (FILE *fp, const struct bench_results *r, double col, size_t per_row,
        double y0)
{
  char name[64];
  size_t i;

  for (i = 0; i < r->nruns; i++) {
    const struct policy_result *p = &r->runs[i];
    double x = 14 + (double) (i % per_row) * col;
    double y = y0 + (double) (i / per_row) * LEGEND_ROW;

    fprintf (fp, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" "
             "stroke=\"%s\" stroke-width=\"3\"/>\n", x, y - 4, x + 24, y - 4,
             colour (p->policy));
    fprintf (fp, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"12\">",
             x + LEGEND_SWATCH, y);
    xml_text (fp, run_name (name, sizeof name, p));
    fprintf (fp, ": write max %.1f ms</text>\n",
             (double) p->model.write.max / 1e6);
  }
}

void
svg_write (FILE *fp, const struct bench_results *r)
{
  static const char *const titles[3] = { "Write", "Writeback", "Flush" };
  const int width = 3 * PANEL_W + CORR_W + 20;
  const double col = legend_col (r);
  const size_t per_row = col > 0 && (size_t) ((width - 28) / col) > 0
    ? (size_t) ((width - 28) / col) : 1;
  const size_t rows = r->nruns > 0 ? (r->nruns + per_row - 1) / per_row : 1;
  const int height = TOP + PANEL_H + LEGEND_H +
    (int) (rows - 1) * LEGEND_ROW;
  char sub[512];
  size_t i;
  int op;

  fprintf (fp, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
  fprintf (fp, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" "
           "height=\"%d\" viewBox=\"0 0 %d %d\" "
           "font-family=\"sans-serif\">\n", width, height, width, height);
  fprintf (fp, "<rect width=\"100%%\" height=\"100%%\" fill=\"#fafafa\"/>\n");
  fprintf (fp, "<text x=\"%d\" y=\"22\" text-anchor=\"middle\" "
           "font-size=\"16\" font-weight=\"bold\">" PROG ": latency tails "
           "and corruption per stable-page policy</text>\n", width / 2);
  snprintf (sub, sizeof sub, "%s, %u writers, %" PRIu64 " pages of %" PRIu32
            " bytes, flush every %u ms, race delay %" PRIu32 " us",
            r->dev.format[0] ? r->dev.format : "?", r->opts->threads,
            r->opts->working_set / r->opts->page_size, r->opts->page_size,
            r->opts->flush_interval_ms, r->opts->race_delay_us);
  fprintf (fp, "<text x=\"%d\" y=\"40\" text-anchor=\"middle\" "
           "font-size=\"12\">", width / 2);
  xml_text (fp, sub);
  fputs ("</text>\n", fp);

  for (op = 0; op < 3; op++) {
    struct axes a;

    a.x0 = 10 + op * PANEL_W + MARGIN_L;
    a.y0 = TOP + MARGIN_T;
    a.w = PANEL_W - MARGIN_L - MARGIN_R;
    a.h = PANEL_H - MARGIN_T - MARGIN_B;
    axes_fit (&a, r, op);
    panel_axes (fp, &a, titles[op]);
    for (i = 0; i < r->nruns; i++)
      curve (fp, &a, op_hist (&r->runs[i], op), r->runs[i].policy);
  }
  corruption_panel (fp, r, 10 + 3 * PANEL_W + CORR_L, TOP + MARGIN_T,
                    CORR_W - CORR_L - MARGIN_R, PANEL_H - MARGIN_T - MARGIN_B);
  legend (fp, r, col, per_row, TOP + PANEL_H + 18);
  fputs ("</svg>\n", fp);
}

int
svg_open (struct svg_out *so, const char *path)
{
  int fd;

  memset (so, 0, sizeof *so);
  so->path = path;
  if (path == NULL)
    return 0;
  /* Create it, or open what is there without truncating it: its old
   * contents go only when the plot replaces them (svg_finish). */
  fd = open (path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOCTTY, 0666);
  if (fd >= 0)
    so->created = true;
  else if (errno == EEXIST)
    fd = open (path, O_WRONLY | O_CREAT | O_CLOEXEC | O_NOCTTY, 0666);
  if (fd == -1) {
    fprintf (stderr, PROG ": --svg %s: %s\n", path, strerror (errno));
    return -1;
  }
  so->fp = fdopen (fd, "w");
  if (so->fp == NULL) {
    fprintf (stderr, PROG ": --svg %s: %s\n", path, strerror (errno));
    close (fd);
    svg_abandon (so);
    return -1;
  }
  return 0;
}

void
svg_abandon (struct svg_out *so)
{
  if (so->fp) {
    fclose (so->fp);
    so->fp = NULL;
  }
  if (so->created) {
    unlink (so->path);
    so->created = false;
  }
}

int
svg_finish (struct svg_out *so, const struct bench_results *r)
{
  struct stat st;
  int err = 0;

  if (so->fp == NULL)
    return 0;
  /* A regular file that was there: its old contents go now.  (Not a
   * pipe or a terminal, which cannot be truncated.) */
  if (fstat (fileno (so->fp), &st) == -1)
    err = errno;
  else if (S_ISREG (st.st_mode) && ftruncate (fileno (so->fp), 0) == -1)
    err = errno;
  if (err == 0) {
    errno = 0;
    svg_write (so->fp, r);
    if (fflush (so->fp) == EOF || ferror (so->fp))
      err = errno ? errno : EIO;
  }
  if (fclose (so->fp) == EOF && err == 0)
    err = errno;
  so->fp = NULL;
  if (err) {
    fprintf (stderr, PROG ": --svg %s: writing failed: %s%s\n", so->path,
             strerror (err), so->created ? " (file removed)" : "");
    svg_abandon (so);           /* a partial plot of ours: removed */
    return -1;
  }
  so->created = false;
  return 0;
}
