# SPDX-License-Identifier: MIT
"""Ranged GET answers with the faults a client must refuse, shared by the
scripted servers (http_script.py, s3_hostile.py).

answer(handler, mode, data, etag): answers the request handler's GET (or
HEAD) of @data, honouring its Range header with a 206 that is, by mode:
  good      what was asked
  other     its Content-Range and body start at 0, whatever was asked
  capped    honest, but at most 16 bytes (RFC 9110 allows a server to
            send less than asked; the client asks again for the rest)
  trickle   honest, but 1 byte per answer (a client that reads on forever
            never ends)
  drift     capped, and every answer is another version (its ETag and
            Last-Modified change): the rest must not be read from it; an
            If-Match that names no longer the current ETag answers 412
  cap200    capped for the first ranged GET of the path, then 200 with
            the whole object
  capother  capped for the first ranged GET of the path, then a 206 whose
            Content-Range and body start at 0
  eofclose  honest headers, no Content-Length, half the body, then the
            connection closes (a GET without Range: a 200 so cut)
handler.reply(status, body, headers) sends a whole answer.
"""
import threading

_lock = threading.Lock()
_seen = {}  # path -> ranged GETs answered


def _nth(path):
    """How many ranged GETs of @path came, this one included."""
    with _lock:
        _seen[path] = _seen.get(path, 0) + 1
        return _seen[path]


def answer(handler, mode, data, etag):
    n = len(data)
    rng = handler.headers.get("Range", "")
    first, last = 0, n - 1
    if rng.startswith("bytes="):
        a, _, b = rng[6:].partition("-")
        first = int(a)
        last = min(int(b), n - 1) if b else n - 1
    nth = _nth(handler.path) if rng else 0
    lm = "Mon, 01 Jan 2024 00:00:00 GMT"
    if mode in ("cap200", "capother") and nth > 1:
        mode = "all" if mode == "cap200" else "other"
    if mode == "other":
        last, first = last - first, 0
    elif mode in ("capped", "drift", "cap200", "capother"):
        last = min(last, first + 15)
    elif mode == "trickle":
        last = first
    if mode == "drift":
        etag = '"v%d"' % nth
        lm = "Mon, 01 Jan 2024 00:00:%02d GMT" % (nth % 60)
        pin = handler.headers.get("If-Match")
        if pin and pin != etag:
            handler.reply(412, b"precondition failed", [("ETag", etag)])
            return
    if mode == "all":
        first, last, rng = 0, n - 1, ""
    body = data[first:last + 1]
    status = 206 if rng else 200
    hdrs = [("ETag", etag), ("Last-Modified", lm)]
    if rng:
        hdrs.append(("Content-Range", "bytes %d-%d/%d" % (first, last, n)))
    if mode != "eofclose":
        handler.reply(status, body, hdrs)
        return
    handler.send_response(status)
    for k, v in hdrs:
        handler.send_header(k, v)
    handler.send_header("Connection", "close")
    handler.end_headers()
    if handler.command != "HEAD":
        handler.wfile.write(body[:len(body) // 2])
    handler.wfile.flush()
    handler.close_connection = True
