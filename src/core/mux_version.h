/* SPDX-License-Identifier: MIT */
/*
 * mux_version.h - the version identity of an object across the members of
 * a mux (DESIGN section 6: "version tokens are compared per member").
 */
#ifndef SMUX_CORE_MUX_VERSION_H
#define SMUX_CORE_MUX_VERSION_H

#include <stdbool.h>

#include "smux/backend.h"

/*
 * Whether @now, the info of an object on member backend @now_on, is the
 * version described by @had, seen on member backend @had_on. See
 * mux_version.c for the rule.
 */
bool smux__same_version(const struct smux_backend *had_on,
			const struct smux_info *had,
			const struct smux_backend *now_on,
			const struct smux_info *now);

/*
 * Whether a reader of @had on @had_on may read on: @now (on @now_on, where
 * a read of the key goes now) is that version as smux__same_version says,
 * or, across members one of which keeps mtimes to the second only (an
 * HTTP server's Last-Modified), the same size and second. Used for a
 * reader's version check and its failover onto another member: a false
 * match needs a rewrite of the same size within that second behind the
 * caller (a rewrite through it re-pins its readers), which the member's
 * own token (nginx: size and mtime in seconds) cannot tell either. With
 * exact mtimes on both sides it is smux__same_version.
 */
bool smux__version_current(const struct smux_backend *had_on,
			   const struct smux_info *had,
			   const struct smux_backend *now_on,
			   const struct smux_info *now);

#endif /* SMUX_CORE_MUX_VERSION_H */
