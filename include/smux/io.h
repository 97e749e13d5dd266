/* SPDX-License-Identifier: MIT */
/*
 * smux/io.h - where object bytes come from (sources) and go to (sinks).
 *
 * A source is re-readable and stateless: every read names its position, so
 * one source can feed several backends at once (mirror fan-out) and be read
 * again from the start (retry, fall-through). A sink receives the bytes of a
 * get in order; it can be rewound when the mux retries on another backend.
 *
 * Neither ever holds a whole object unless the caller asked for a buffer.
 */
#ifndef SMUX_IO_H
#define SMUX_IO_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "smux/error.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The chunk size streaming code uses between sources, backends and sinks. */
#define SMUX_IO_CHUNK (1u << 20)

enum smux_source_kind {
	SMUX_SOURCE_BUF, /* bytes in memory */
	SMUX_SOURCE_FD,	 /* a byte range of a file descriptor, read by pread */
	SMUX_SOURCE_CB,	 /* a callback that reads at a position */
};

/*
 * Reads up to @len bytes at @pos (relative to the source's start) into
 * @dst. Returns bytes read (0 only at the end), or a negative errno.
 * Must be safe to call from several threads at once.
 */
typedef long (*smux_source_read_fn)(void *arg, uint64_t pos, void *dst,
				    size_t len);

struct smux_source {
	enum smux_source_kind kind;
	uint64_t length; /* exact number of bytes the source yields */
	/*
	 * Where smux_source_read() records a failure of the source itself
	 * (its fd, its callback, a source shorter than it said) as a
	 * positive errno, so a failed put can tell the caller's failure from
	 * the backend's (SMUX_CLASS_LOCAL). NULL (the initialisers' value):
	 * not recorded. The put dispatch wrapper points it at its own flag
	 * on a private copy of the source.
	 */
	atomic_int *failed;
	union {
		const void *buf; /* SMUX_SOURCE_BUF, borrowed */
		struct {
			int fd;		 /* borrowed; never closed here */
			uint64_t offset; /* where the range starts in the fd */
		} fd;
		struct {
			smux_source_read_fn read;
			void *arg;
		} cb;
	} u;
};

/* Initialisers. Every pointer and fd stays owned by the caller. */
void smux_source_buf(struct smux_source *s, const void *buf, uint64_t len);
void smux_source_fd(struct smux_source *s, int fd, uint64_t offset,
		    uint64_t len);
void smux_source_cb(struct smux_source *s, smux_source_read_fn read, void *arg,
		    uint64_t len);

/*
 * Reads exactly min(@len, length - @pos) bytes at @pos into @dst (short
 * only at the end). Returns the number read or a negative errno; a source
 * that ends early is -EIO. A failure (except a callback's -ECANCELED) is
 * recorded in *s->failed when set. Thread-safe for concurrent readers.
 */
long smux_source_read(const struct smux_source *s, uint64_t pos, void *dst,
		      size_t len);

enum smux_sink_kind {
	SMUX_SINK_BUF, /* a caller's fixed buffer; overflow is an error */
	SMUX_SINK_DYN, /* a growing heap buffer the sink allocates */
	SMUX_SINK_FD,  /* pwrite to a file descriptor from an offset */
	SMUX_SINK_CB,  /* a callback per chunk */
};

/* Takes the next @len bytes. Returns 0 or a negative errno (stops the get). */
typedef int (*smux_sink_write_fn)(void *arg, const void *data, size_t len);
/* Forgets everything written so far (for a retry). 0 or negative errno;
 * NULL means the sink cannot be rewound. */
typedef int (*smux_sink_rewind_fn)(void *arg);

/*
 * A sink. `written` counts the bytes taken since init or the last rewind.
 * `error` is the positive errno of the sink's own last failure (its fd,
 * buffer or callback refused the bytes: ENOSPC in the cache directory, a
 * full caller buffer), 0 when none since init, the last rewind, or the
 * start of the get it serves (the get dispatch wrapper clears it): a get
 * that fails with `error` set failed on the caller's side
 * (SMUX_CLASS_LOCAL), not the backend's. A callback's -ECANCELED (a
 * consumer stopping the get on purpose: a race's loser, an abandoned job)
 * is not recorded. A sink is used by one thread at a time.
 */
struct smux_sink {
	enum smux_sink_kind kind;
	uint64_t written;
	int error;
	union {
		struct {
			void *buf; /* borrowed */
			size_t cap;
		} buf;
		struct {
			unsigned char *buf; /* owned; smux_sink_dyn_take() */
			size_t cap;
		} dyn;
		struct {
			int fd; /* borrowed */
			uint64_t offset;
		} fd;
		struct {
			smux_sink_write_fn write;
			smux_sink_rewind_fn rewind;
			void *arg;
		} cb;
	} u;
};

void smux_sink_buf(struct smux_sink *s, void *buf, size_t cap);
void smux_sink_dyn(struct smux_sink *s);
void smux_sink_fd(struct smux_sink *s, int fd, uint64_t offset);
void smux_sink_cb(struct smux_sink *s, smux_sink_write_fn write,
		  smux_sink_rewind_fn rewind, void *arg);

/*
 * Appends @len bytes. Returns 0 or a negative errno: -ENOBUFS when a
 * SMUX_SINK_BUF is full, -ENOMEM, a pwrite errno, or the callback's value
 * (recorded in s->error, except a callback's -ECANCELED).
 */
int smux_sink_write(struct smux_sink *s, const void *data, size_t len);
/* Rewinds to 0 bytes written (and no error). -ENOTSUP when the callback
 * sink has none. */
int smux_sink_rewind(struct smux_sink *s);
/* True when smux_sink_rewind() can succeed. */
int smux_sink_can_rewind(const struct smux_sink *s);
/*
 * For SMUX_SINK_DYN: hands the buffer (NUL-terminated past `written` bytes,
 * so text can be used as a string) to the caller, who frees it with
 * free(); the sink is empty afterwards. NULL when nothing was written.
 */
unsigned char *smux_sink_dyn_take(struct smux_sink *s, size_t *len);
/* Frees what a SMUX_SINK_DYN still owns; no-op for the other kinds. */
void smux_sink_release(struct smux_sink *s);

/*
 * Opens an unnamed temporary file (gone when closed) in $TMPDIR, or /tmp,
 * for spooling an object through the local disk (copy and setattr
 * fallbacks, copies between shards, hint replay): memory stays bounded
 * whatever the object size. smuxfs points TMPDIR at its cache directory.
 * Returns the descriptor, or a negative errno with @err
 * (STORAGE.LOCAL_IO_ERROR, the caller's own failure, naming @what and the
 * directory, with open's errno).
 */
int smux_tmpfile(const char *backend, const char *what, struct smux_error *err);

/*
 * Copies the whole of @src to @sink through one SMUX_IO_CHUNK buffer,
 * checking @ctx between chunks when it is not NULL. Used by backends and
 * fallbacks. Returns 0 or a negative errno with @err filled.
 */
struct smux_ctx;
int smux_io_copy(const struct smux_ctx *ctx, const struct smux_source *src,
		 struct smux_sink *sink, const char *backend,
		 struct smux_error *err);

#ifdef __cplusplus
}
#endif

#endif /* SMUX_IO_H */
