/* SPDX-License-Identifier: MIT */
/*
 * io.c - sources and sinks (smux/io.h), and the one streaming copy loop
 * every backend and fallback shares.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "smux/ctx.h"
#include "smux/io.h"

void smux_source_buf(struct smux_source *s, const void *buf, uint64_t len)
{
	memset(s, 0, sizeof(*s));
	s->kind = SMUX_SOURCE_BUF;
	s->length = len;
	s->u.buf = buf;
}

void smux_source_fd(struct smux_source *s, int fd, uint64_t offset,
		    uint64_t len)
{
	memset(s, 0, sizeof(*s));
	s->kind = SMUX_SOURCE_FD;
	s->length = len;
	s->u.fd.fd = fd;
	s->u.fd.offset = offset;
}

void smux_source_cb(struct smux_source *s, smux_source_read_fn read, void *arg,
		    uint64_t len)
{
	memset(s, 0, sizeof(*s));
	s->kind = SMUX_SOURCE_CB;
	s->length = len;
	s->u.cb.read = read;
	s->u.cb.arg = arg;
}

/* One read of at most @len bytes at @pos; may be short. */
static long source_read_once(const struct smux_source *s, uint64_t pos,
			     void *dst, size_t len)
{
	ssize_t n;

	switch (s->kind) {
	case SMUX_SOURCE_BUF:
		memcpy(dst, (const unsigned char *)s->u.buf + pos, len);
		return (long)len;
	case SMUX_SOURCE_FD:
		do {
			n = pread(s->u.fd.fd, dst, len,
				  (off_t)(s->u.fd.offset + pos));
		} while (n < 0 && errno == EINTR);
		return n < 0 ? -errno : (long)n;
	case SMUX_SOURCE_CB:
		return s->u.cb.read(s->u.cb.arg, pos, dst, len);
	}
	return -EINVAL;
}

/* Records the source's own failure @n (a negative errno) for the put that
 * reads it; a callback's -ECANCELED is a stop, not a failure. Returns @n. */
static long source_failed(const struct smux_source *s, long n)
{
	int none = 0;

	if (s->failed && n != -ECANCELED)
		atomic_compare_exchange_strong(s->failed, &none, (int)-n);
	return n;
}

long smux_source_read(const struct smux_source *s, uint64_t pos, void *dst,
		      size_t len)
{
	size_t done = 0;

	if (pos >= s->length)
		return 0;
	if (len > s->length - pos)
		len = (size_t)(s->length - pos);
	if (len > (size_t)0x7fffffff)
		len = 0x7fffffff;
	while (done < len) {
		long n = source_read_once(
			s, pos + done, (unsigned char *)dst + done, len - done);

		if (n == 0 || (n > 0 && (size_t)n > len - done))
			n = -EIO; /* shorter than it said, or overran dst */
		if (n < 0)
			return source_failed(s, n);
		done += (size_t)n;
	}
	return (long)done;
}

void smux_sink_buf(struct smux_sink *s, void *buf, size_t cap)
{
	memset(s, 0, sizeof(*s));
	s->kind = SMUX_SINK_BUF;
	s->u.buf.buf = buf;
	s->u.buf.cap = cap;
}

void smux_sink_dyn(struct smux_sink *s)
{
	memset(s, 0, sizeof(*s));
	s->kind = SMUX_SINK_DYN;
}

void smux_sink_fd(struct smux_sink *s, int fd, uint64_t offset)
{
	memset(s, 0, sizeof(*s));
	s->kind = SMUX_SINK_FD;
	s->u.fd.fd = fd;
	s->u.fd.offset = offset;
}

void smux_sink_cb(struct smux_sink *s, smux_sink_write_fn write,
		  smux_sink_rewind_fn rewind, void *arg)
{
	memset(s, 0, sizeof(*s));
	s->kind = SMUX_SINK_CB;
	s->u.cb.write = write;
	s->u.cb.rewind = rewind;
	s->u.cb.arg = arg;
}

/* Grows a dynamic sink to hold @need bytes plus a NUL. */
static int dyn_reserve(struct smux_sink *s, size_t need)
{
	size_t cap = s->u.dyn.cap ? s->u.dyn.cap : 4096;
	unsigned char *p;

	if (need == SIZE_MAX)
		return -ENOMEM;
	need += 1;
	if (need <= s->u.dyn.cap)
		return 0;
	while (cap < need) {
		if (cap > SIZE_MAX / 2)
			return -ENOMEM;
		cap *= 2;
	}
	p = realloc(s->u.dyn.buf, cap);
	if (!p)
		return -ENOMEM;
	s->u.dyn.buf = p;
	s->u.dyn.cap = cap;
	return 0;
}

static int fd_write_all(int fd, const void *data, size_t len, uint64_t off)
{
	size_t done = 0;

	while (done < len) {
		ssize_t n = pwrite(fd, (const unsigned char *)data + done,
				   len - done, (off_t)(off + done));

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		done += (size_t)n;
	}
	return 0;
}

int smux_sink_write(struct smux_sink *s, const void *data, size_t len)
{
	int rc = 0;

	if (len == 0)
		return 0;
	switch (s->kind) {
	case SMUX_SINK_BUF:
		if (s->written > s->u.buf.cap ||
		    len > s->u.buf.cap - s->written)
			return -ENOBUFS;
		memcpy((unsigned char *)s->u.buf.buf + s->written, data, len);
		break;
	case SMUX_SINK_DYN:
		if (s->written + len < s->written)
			return -ENOMEM;
		rc = dyn_reserve(s, (size_t)s->written + len);
		if (rc)
			return rc;
		memcpy(s->u.dyn.buf + s->written, data, len);
		s->u.dyn.buf[s->written + len] = '\0';
		break;
	case SMUX_SINK_FD:
		rc = fd_write_all(s->u.fd.fd, data, len,
				  s->u.fd.offset + s->written);
		break;
	case SMUX_SINK_CB:
		rc = s->u.cb.write(s->u.cb.arg, data, len);
		break;
	}
	if (rc == 0)
		s->written += len;
	else if (rc != -ECANCELED)
		s->error = -rc; /* the caller's side failed, not the backend */
	return rc;
}

int smux_sink_can_rewind(const struct smux_sink *s)
{
	return s->kind != SMUX_SINK_CB || s->u.cb.rewind != NULL;
}

int smux_sink_rewind(struct smux_sink *s)
{
	if (s->kind == SMUX_SINK_CB) {
		int rc;

		if (!s->u.cb.rewind)
			return -ENOTSUP;
		rc = s->u.cb.rewind(s->u.cb.arg);
		if (rc)
			return rc;
	}
	s->written = 0;
	s->error = 0;
	return 0;
}

unsigned char *smux_sink_dyn_take(struct smux_sink *s, size_t *len)
{
	unsigned char *p;

	if (s->kind != SMUX_SINK_DYN)
		return NULL;
	p = s->u.dyn.buf;
	if (p && s->written == 0) {
		/* rewound since the last write: its bytes are stale */
		free(p);
		p = NULL;
	}
	if (len)
		*len = (size_t)s->written;
	s->u.dyn.buf = NULL;
	s->u.dyn.cap = 0;
	s->written = 0;
	return p;
}

void smux_sink_release(struct smux_sink *s)
{
	if (s->kind == SMUX_SINK_DYN) {
		free(s->u.dyn.buf);
		s->u.dyn.buf = NULL;
		s->u.dyn.cap = 0;
	}
}

int smux_tmpfile(const char *backend, const char *what, struct smux_error *err)
{
	const char *dir = getenv("TMPDIR");
	char path[4096];
	int fd;

	if (!dir || !dir[0])
		dir = "/tmp";
	fd = open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
	if (fd < 0 && (errno == EOPNOTSUPP || errno == EISDIR)) {
		/* a filesystem without O_TMPFILE: a named file, unlinked */
		if (snprintf(path, sizeof(path), "%s/smux-tmp.XXXXXX", dir) <
		    (int)sizeof(path)) {
			fd = mkostemp(path, O_CLOEXEC);
			if (fd >= 0)
				unlink(path);
		}
	}
	if (fd < 0) {
		/* the caller's local problem (a full or failing TMPDIR),
		 * never a missing key nor the backend's failure */
		int e = errno;

		smux_error_set(err, SMUX_E_LOCAL_IO, backend,
			       "%s: temporary file in %s: %s", what, dir,
			       strerror(e));
		return smux_error_make_local(err, e);
	}
	return fd;
}

int smux_io_copy(const struct smux_ctx *ctx, const struct smux_source *src,
		 struct smux_sink *sink, const char *backend,
		 struct smux_error *err)
{
	size_t chunk = SMUX_IO_CHUNK;
	unsigned char *buf;
	uint64_t pos = 0;
	int rc = 0;

	if (src->length < chunk)
		chunk = src->length ? (size_t)src->length : 1;
	buf = malloc(chunk);
	if (!buf)
		return smux_error_set(err, SMUX_E_NO_MEMORY, backend,
				      "copy buffer of %zu bytes", chunk);
	while (pos < src->length) {
		long n;

		if (ctx) {
			rc = smux_ctx_check(ctx, backend, err);
			if (rc)
				goto out_free;
		}
		n = smux_source_read(src, pos, buf, chunk);
		if (n < 0) {
			rc = smux_error_from_errno(err, (int)-n, backend,
						   "read source");
			goto out_free;
		}
		rc = smux_sink_write(sink, buf, (size_t)n);
		if (rc) {
			rc = smux_error_from_errno(err, -rc, backend,
						   "write sink");
			goto out_free;
		}
		pos += (uint64_t)n;
	}
out_free:
	free(buf);
	return rc;
}
