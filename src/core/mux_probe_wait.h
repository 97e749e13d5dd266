/* SPDX-License-Identifier: MIT */
/*
 * mux_probe_wait.h - the probe window: a walk that found no member to
 * call waits for a probe of a down member that is under way.
 */
#ifndef SMUX_CORE_MUX_PROBE_WAIT_H
#define SMUX_CORE_MUX_PROBE_WAIT_H

#include "core/mux_internal.h"

/*
 * Once the member-order walk of @c (failover, shield) has run out of
 * members: a member it passed over because another thread (the
 * background thread) was probing it is waited for until that probe ends,
 * at most the member's deadline (the mux's backend_timeout) and @ctx's.
 * Returns it (a reference, counted as tried) when the probe brought it
 * back, or when its cooldown is over and this caller may probe it
 * (*@probe set); NULL otherwise, and always NULL the second time for one
 * walk.
 */
struct mux_member *smux__cursor_probed(struct mux_cursor *c,
				       const struct smux_ctx *ctx, bool *probe);

/*
 * Waits for the probe of @m another caller runs to end, at most the
 * member's deadline (the mux's backend_timeout) and @ctx's: true when @m
 * may be called now (back up, or its cooldown over and this caller's own
 * probe: *@probe set). A member no probe runs on is acquired once.
 */
bool smux__probe_wait(struct smux_mux *mux, const struct smux_ctx *ctx,
		      struct mux_member *m, bool *probe);

/* Test hook (NULL in production): called when a request starts waiting
 * for the probe of @m (its first acquire failed while @m was probed). */
extern void (*smux__probe_window_hook)(struct smux_mux *mux,
				       struct mux_member *m);

/* Test hook (NULL in production): a walk that ran out of members looks
 * at them again (smux__cursor_probed). */
extern void (*smux__probe_walk_hook)(struct smux_mux *mux);

#endif /* SMUX_CORE_MUX_PROBE_WAIT_H */
