/* SPDX-License-Identifier: BSD-3-Clause */
/* stabledif: allocation failures on demand, for the unit tests of code
 * that must fail cleanly when memory runs out.
 *
 * A test program that includes this header is linked with
 * -Wl,--wrap=malloc -Wl,--wrap=calloc (tests/Makefile.am), so every
 * malloc and calloc call of its own objects and of the server's static
 * libraries goes through the wrappers below; shared libraries are not
 * affected.  While alloc_left is not negative, that many more calls
 * succeed and every one after them fails with ENOMEM.  Arm it just
 * around the call under test and set it back to -1 right after. */
#ifndef STABLEDIF_TEST_ALLOC_FAIL_H
#define STABLEDIF_TEST_ALLOC_FAIL_H

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>

/* Allocations that still succeed; -1: all do. */
static long alloc_left = -1;

void *__real_malloc (size_t size);
void *__real_calloc (size_t n, size_t size);
void *__wrap_malloc (size_t size);
void *__wrap_calloc (size_t n, size_t size);

/* Whether the allocation being made must fail (and count it if not). */
static inline bool
alloc_fails (void)
{
  if (alloc_left < 0)
    return false;
  if (alloc_left == 0)
    return true;
  alloc_left--;
  return false;
}

void *
__wrap_malloc (size_t size)
{
  if (alloc_fails ()) {
    errno = ENOMEM;
    return NULL;
  }
  return __real_malloc (size);
}

void *
__wrap_calloc (size_t n, size_t size)
{
  if (alloc_fails ()) {
    errno = ENOMEM;
    return NULL;
  }
  return __real_calloc (n, size);
}

#endif /* STABLEDIF_TEST_ALLOC_FAIL_H */
