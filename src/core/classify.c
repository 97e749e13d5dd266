/* SPDX-License-Identifier: MIT */
/*
 * classify.c - the error classification of seed section 4: which outcome
 * one failed attempt has for the mux (fall through or not, count against
 * health or not, count as a timeout or not).
 *
 * Owns: smux_classify() and smux_outcome_name(). Pure functions: no state,
 * no locks, no allocation. Never looks at health, stats or the clock; the
 * mux acts on the outcome.
 */
#include "smux/error.h"
#include "smux/mux.h"

enum smux_outcome smux_classify(const struct smux_error_info *e)
{
	if (!e || e->code == SMUX_OK)
		return SMUX_OUTCOME_OK;
	/* The caller gave up: never falls through, never counts. */
	if (e->code == SMUX_E_BACKEND_ABORTED)
		return SMUX_OUTCOME_ABORT;
	/*
	 * Only the bulkhead's deadline is a timeout; a backend that reports
	 * ETIMEDOUT on a connection is an ordinary transient failure.
	 */
	if (e->code == SMUX_E_BACKEND_TIMEOUT)
		return SMUX_OUTCOME_TIMEOUT;
	/*
	 * smux_error_class() maps HTTP 4xx (except 408/429) to semantic and
	 * unknown or out-of-range codes to transient, so whatever is not
	 * known to be final or an abort falls through.
	 */
	switch (smux_error_class(e)) {
	case SMUX_CLASS_ABORT:
		return SMUX_OUTCOME_ABORT;
	case SMUX_CLASS_SEMANTIC:
		return SMUX_OUTCOME_SEMANTIC;
	case SMUX_CLASS_LOCAL:
		return SMUX_OUTCOME_LOCAL;
	case SMUX_CLASS_NONE:
	case SMUX_CLASS_TRANSIENT:
		break;
	}
	return SMUX_OUTCOME_TRANSIENT;
}

const char *smux_outcome_name(enum smux_outcome o)
{
	switch (o) {
	case SMUX_OUTCOME_OK:
		return "ok";
	case SMUX_OUTCOME_TRANSIENT:
		return "transient";
	case SMUX_OUTCOME_SEMANTIC:
		return "semantic";
	case SMUX_OUTCOME_ABORT:
		return "abort";
	case SMUX_OUTCOME_TIMEOUT:
		return "timeout";
	case SMUX_OUTCOME_LOCAL:
		return "local";
	}
	return "unknown";
}
