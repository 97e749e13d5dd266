/* SPDX-License-Identifier: MIT */
/*
 * backends/s3_xml.h - parsing the XML bodies of S3 responses (expat).
 *
 * Owns: a streaming parser fed the body as it arrives (any chunking), with
 * bounds on the document size, the length of every text field and the
 * number of entries; the result structure of each document kind
 * (ListObjectsV2, Error, InitiateMultipartUpload, CompleteMultipartUpload,
 * CopyObject / UploadPartCopy, DeleteObjects); `encoding-type=url`
 * decoding; and the mapping of an S3 error code to a smux error.
 *
 * Every body is hostile input: a malformed, truncated, oversized or
 * unexpected document is an error (code STORAGE.BAD_RESPONSE, -EIO), never
 * a crash. DTDs and entity declarations are refused. Element names are
 * matched without their namespace (AWS, Swift and s3rver differ there).
 *
 * Threads: a parser belongs to one thread at a time; parsers share nothing.
 */
#ifndef SMUX_BACKENDS_S3_XML_H
#define SMUX_BACKENDS_S3_XML_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "smux/error.h"

#define SMUX_S3_XML_DOC_MAX   (32u << 20) /* bytes of one document */
#define SMUX_S3_XML_TEXT_MAX  8192	  /* bytes of one text field */
#define SMUX_S3_XML_ITEMS_MAX 20000	  /* entries of one document */

/* The document expected (a <Error> root is always accepted too). */
enum smux_s3_doc {
	SMUX_S3_DOC_LIST,     /* <ListBucketResult> (ListObjectsV2) */
	SMUX_S3_DOC_ERROR,    /* <Error> only */
	SMUX_S3_DOC_INITIATE, /* <InitiateMultipartUploadResult> */
	SMUX_S3_DOC_COMPLETE, /* <CompleteMultipartUploadResult> */
	SMUX_S3_DOC_COPY,     /* <CopyObjectResult> or <CopyPartResult> */
	SMUX_S3_DOC_DELETE,   /* <DeleteResult> (DeleteObjects) */
};

/* One object of a listing. */
struct smux_s3_obj {
	char *key;	  /* decoded (encoding-type=url undone) */
	uint64_t size;	  /* <Size> */
	char *etag;	  /* without the surrounding quotes; NULL if absent */
	int64_t mtime_ns; /* <LastModified>; 0 if absent */
};

/* One per-key failure of DeleteObjects. */
struct smux_s3_delete_error {
	char *key;
	char *code;
	char *message; /* control characters replaced by '?' */
};

/* What a document said. Strings are owned by the parser (freed with it);
 * absent fields are NULL / 0 / false. */
struct smux_s3_result {
	/* The root element was <Error> (S3 may send one with status 200 for
	 * CompleteMultipartUpload and copies): code/message/... are set. */
	bool is_error;
	char *code;	  /* "NoSuchKey" */
	char *message;	  /* control characters replaced by '?' */
	char *region;	  /* <Region> of a redirect or a wrong-region error */
	char *endpoint;	  /* <Endpoint> of a PermanentRedirect */
	char *request_id; /* <RequestId> */

	/* LIST */
	struct smux_s3_obj *objs;
	size_t nobjs;
	char **prefixes; /* CommonPrefixes, decoded */
	size_t nprefixes;
	bool truncated;	  /* <IsTruncated>true */
	char *next_token; /* <NextContinuationToken>, opaque */
	bool url_encoded; /* <EncodingType>url: keys were decoded */
	long key_count;	  /* <KeyCount>, -1 if absent */

	/* INITIATE (upload_id), COMPLETE (etag, key), COPY (etag, mtime) */
	char *upload_id;
	char *etag; /* without quotes */
	char *key;
	int64_t mtime_ns;

	/* DELETE */
	size_t ndeleted;
	struct smux_s3_delete_error *delete_errors;
	size_t ndelete_errors;
};

struct smux_s3_xml;

/* A parser for a document of @kind. NULL when out of memory. */
struct smux_s3_xml *smux__s3_xml_new(enum smux_s3_doc kind);
/* Frees the parser and its result (NULL allowed). */
void smux__s3_xml_free(struct smux_s3_xml *x);

/*
 * Feeds @len bytes of the body. Returns 0, or -EIO (BAD_RESPONSE: not
 * XML, the wrong root, a field too long, too many entries, the document
 * over SMUX_S3_XML_DOC_MAX, a DTD) or -ENOMEM; after an error every later
 * call fails the same way.
 */
int smux__s3_xml_feed(struct smux_s3_xml *x, const void *buf, size_t len,
		      struct smux_error *err);
/*
 * Ends the document: -EIO when it is truncated, empty or fails the checks
 * that need all of it (a listing's bad URL encoding, an Initiate without
 * UploadId). On 0, smux__s3_xml_result is valid until the free.
 */
int smux__s3_xml_finish(struct smux_s3_xml *x, struct smux_error *err);
const struct smux_s3_result *smux__s3_xml_result(const struct smux_s3_xml *x);

/* Whole-buffer convenience: new + feed + finish. On 0, *out is the parser
 * (free it with smux__s3_xml_free); on error *out is NULL. */
int smux__s3_xml_parse(enum smux_s3_doc kind, const void *buf, size_t len,
		       struct smux_s3_xml **out, struct smux_error *err);

/*
 * Fills @err for a failed S3 request from its HTTP @status and the parsed
 * error document @res (NULL when the body was absent or unparsable):
 * NoSuchKey/NoSuchUpload -> KEY_NOT_FOUND, AccessDenied,
 * SignatureDoesNotMatch, InvalidAccessKeyId -> PERMISSION_DENIED,
 * ExpiredToken, TokenRefreshRequired -> CREDENTIAL_EXPIRED,
 * PreconditionFailed -> PRECONDITION_FAILED, KeyTooLongError ->
 * KEY_TOO_LONG, NotImplemented -> NOT_SUPPORTED, InvalidArgument,
 * EntityTooLarge, EntityTooSmall, InvalidPart... -> INVALID_ARGUMENT,
 * anything else by status (smux_error_from_http). The message is
 * "<what>: <Code>: <Message>" (bounded, sanitized). Returns -errno.
 */
int smux__s3_error_fill(struct smux_error *err, int status,
			const struct smux_s3_result *res, const char *backend,
			const char *what);

#endif /* SMUX_BACKENDS_S3_XML_H */
