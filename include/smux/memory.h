/* SPDX-License-Identifier: MIT */
/*
 * smux/memory.h - a backend that keeps objects in process memory.
 *
 * Thread-safe, complete (every optional operation, a writer), for tests,
 * the conformance suite and benchmarks of the mux core. Directory markers
 * are stored as ordinary zero-length keys ending in '/'.
 */
#ifndef SMUX_MEMORY_H
#define SMUX_MEMORY_H

#include "smux/backend.h"

#ifdef __cplusplus
extern "C" {
#endif

/*
 * Creates a memory backend named @name. Returns 0 and *@out (one
 * reference, release with smux_backend_unref) or a negative errno with
 * @err filled.
 */
int smux_memory_new(const char *name, struct smux_backend **out,
		    struct smux_error *err);

/* Number of objects (markers included) the backend holds; for tests. */
unsigned long smux_memory_count(struct smux_backend *b);

#ifdef __cplusplus
}
#endif

#endif /* SMUX_MEMORY_H */
