/* SPDX-License-Identifier: MIT */
/*
 * mode.c - the names of the mux modes (seed section 3), as configuration
 * files, stats and events spell them.
 *
 * Owns: smux_mode_name() and smux_mode_parse(). Pure functions; the
 * routing of each mode lives in mux.c.
 */
#include <errno.h>
#include <string.h>

#include "smux/mux.h"

static const char *const mode_names[SMUX_MODE_COUNT] = {
	[SMUX_MODE_FAILOVER] = "failover",
	[SMUX_MODE_ROUND_ROBIN] = "round-robin",
	[SMUX_MODE_WEIGHTED] = "weighted",
	[SMUX_MODE_STICKY] = "sticky-by-key",
	[SMUX_MODE_SHIELD] = "shield",
	[SMUX_MODE_MIRROR] = "mirror",
};

const char *smux_mode_name(enum smux_mode m)
{
	if ((unsigned)m >= SMUX_MODE_COUNT)
		return "unknown";
	return mode_names[m];
}

int smux_mode_parse(const char *s, enum smux_mode *out)
{
	if (!s)
		return -EINVAL;
	for (unsigned i = 0; i < SMUX_MODE_COUNT; i++) {
		if (strcmp(mode_names[i], s) == 0) {
			if (out)
				*out = (enum smux_mode)i;
			return 0;
		}
	}
	return -EINVAL;
}
