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

#endif /* SMUX_CORE_MUX_VERSION_H */
