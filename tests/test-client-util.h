/* SPDX-License-Identifier: BSD-3-Clause */
/* stabledif: helpers shared by the libstabledif integration test
 * programs (tests/test-client-*.c run by tests/test-client-*.sh against
 * the real nbdkit + plugin).  Header-only.
 */
#ifndef STABLEDIF_TEST_CLIENT_UTIL_H
#define STABLEDIF_TEST_CLIENT_UTIL_H

#include <errno.h>
#include <semaphore.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "stabledif.h"

/* The program's name, for messages (set by main). */
static const char *progname = "test-client";

/* Fail the test: print where, why and the library's last error. */
#define CHECK(cond, ...)                                                \
  do {                                                                  \
    if (!(cond)) {                                                      \
      const char *e_ = stabledif_get_error ();                          \
      fprintf (stderr, "%s: %s:%d: FAIL: ", progname, __FILE__, __LINE__); \
      fprintf (stderr, __VA_ARGS__);                                    \
      fprintf (stderr, "\n  (%s) last error: %s (errno %d)\n", #cond,   \
               e_ ? e_ : "none", stabledif_get_errno ());               \
      exit (EXIT_FAILURE);                                              \
    }                                                                   \
  } while (0)

/* A call that must succeed (returns >= 0). */
#define OK(call)                                                        \
  CHECK ((call) >= 0, "%s failed", #call)

/* A call that must fail with ERRNO and a message containing SUBSTR. */
#define FAILS(call, err, substr)                                        \
  do {                                                                  \
    const char *m_;                                                     \
    CHECK ((call) == -1, "%s succeeded, expected errno %d", #call, (err)); \
    CHECK (stabledif_get_errno () == (err), "%s: errno %d, want %d",   \
           #call, stabledif_get_errno (), (err));                       \
    m_ = stabledif_get_error ();                                        \
    CHECK (m_ && strstr (m_, (substr)), "%s: message lacks \"%s\"",     \
           #call, (substr));                                            \
  } while (0)

/* Deterministic pseudo-random bytes from SEED. */
static inline void
fill_pattern (void *buf, size_t len, uint64_t seed)
{
  uint8_t *p = buf;
  uint64_t x = seed * 0x9e3779b97f4a7c15ull + 0x12345;
  size_t i;

  for (i = 0; i < len; ++i) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    p[i] = (uint8_t) (x >> 24);
  }
}

/* malloc that cannot fail quietly. */
static inline void *
xmalloc (size_t n)
{
  void *p = malloc (n ? n : 1);

  if (p == NULL) {
    perror ("malloc");
    exit (EXIT_FAILURE);
  }
  return p;
}

/* What a completion callback saw (on_done). */
struct done {
  atomic_bool ran;              /* the callback ran */
  int error;                    /* its error */
  char msg[1024];               /* stabledif_get_error() inside it */
};

/* A completion callback that records into the struct done USER_DATA. */
static inline void
on_done (void *user_data, int error)
{
  struct done *d = user_data;
  const char *m = stabledif_get_error ();

  d->error = error;
  snprintf (d->msg, sizeof d->msg, "%s", error && m ? m : "");
  atomic_store (&d->ran, true);
}

/* Wait for SEM at most MS milliseconds (an interrupted wait goes on):
 * 0 once it was taken, -1 when the time ran out. */
static inline int
sem_wait_ms (sem_t *sem, long ms)
{
  struct timespec t;
  int r;

  clock_gettime (CLOCK_REALTIME, &t);
  t.tv_sec += ms / 1000;
  t.tv_nsec += (ms % 1000) * 1000000;
  if (t.tv_nsec >= 1000000000) {
    t.tv_sec++;
    t.tv_nsec -= 1000000000;
  }
  do
    r = sem_timedwait (sem, &t);
  while (r == -1 && errno == EINTR);
  return r == 0 ? 0 : -1;
}

/* Wait for SEM, failing the test (naming WHAT) after SECONDS. */
static inline void
sem_wait_bounded (sem_t *sem, const char *what, int seconds)
{
  CHECK (sem_wait_ms (sem, seconds * 1000L) == 0, "no %s after %d s", what,
         seconds);
}

#endif /* STABLEDIF_TEST_CLIENT_UTIL_H */
