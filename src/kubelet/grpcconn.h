/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kubelet/grpcconn.h - the connection under kubelet/grpc.h's server (grpcserver.c) and unary
 * client (grpcclient.c); private to kubelet/grpc*.c.
 *
 * A `struct grpc_conn` is one HTTP/2 session (nghttp2, included by grpcconn.c only) on one
 * non-blocking unix socket, read and written from libev watchers; its streams
 * (`struct grpc_stream`, embedded in a server call or in a client) each carry gRPC messages
 * with their 5-byte prefix: the bytes received (`in`, capped) and the framed messages queued to
 * send (`out`). The connection sends its SETTINGS, the response HEADERS, trailers and
 * Trailers-Only answers, the client's request HEADERS, RST_STREAM and GOAWAY; its owner (the
 * server or the client) learns what the peer sent through `struct grpc_conn_ops`, called from
 * inside nghttp2's processing of the bytes read (the owner may submit there; nothing it does
 * re-enters nghttp2's reading or writing). Structures are visible so owners can embed them;
 * owners read their fields and change them only through these functions. Does not log.
 */
#pragma once

#include <ev.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/un.h>

#include "base/buf.h"
#include "base/err.h"
#include "kubelet/grpc.h"

#define GRPC_PREFIX      5    /* compressed flag + 4-byte big-endian length */
#define GRPC_MESSAGE_MAX 1024 /* grpc-message bytes kept */

/* HTTP/2 error codes (RFC 9113 section 7) of RST_STREAM, as the stream_close op sees them. */
enum grpc_h2_error {
    GRPC_H2_NO_ERROR = 0,
    GRPC_H2_INTERNAL_ERROR = 2,
    GRPC_H2_REFUSED_STREAM = 7,
    GRPC_H2_CANCEL = 8,
};

struct nghttp2_session;
struct grpc_conn;
struct grpc_stream;

/* What the owner learns of the peer; NULL members are not called. Streams are those opened by
 * stream_open or grpc_stream_request(); frames on others are ignored. */
struct grpc_conn_ops {
    /* Server: a request's HEADERS begin (at most GRPC_MAX_STREAMS at a time: beyond, the
     * connection refuses the stream itself). Returns a stream set up with grpc_stream_init(),
     * or NULL when out of memory (the connection then fails). */
    struct grpc_stream *(*stream_open)(struct grpc_conn *c);
    /* One header of a HEADERS frame; `trailers` when it is not the stream's first HEADERS. */
    void (*header)(struct grpc_stream *st, bool trailers, const uint8_t *name, size_t namelen,
                   const uint8_t *value, size_t valuelen);
    /* Server: the request HEADERS are complete. */
    void (*request)(struct grpc_stream *st);
    /* DATA bytes (any piece of the messages: the owner adds them to st->in). */
    void (*data)(struct grpc_stream *st, const uint8_t *data, size_t len);
    /* The peer ended its side (END_STREAM), after the frame's request and data calls. */
    void (*remote_end)(struct grpc_stream *st);
    /* nghttp2 closed the stream (both sides done, or reset with `error_code`); the connection
     * no longer knows it (the owner releases it now or later). */
    void (*stream_close)(struct grpc_stream *st, uint32_t error_code);
    /* The connection is over (EOF, an error, or nothing more to do): the owner calls
     * grpc_conn_shutdown() and frees, now or later. Never from inside an nghttp2 callback. */
    void (*end)(struct grpc_conn *c);
};

struct grpc_conn {
    struct ev_loop *loop;
    int fd;
    ev_io rio, wio;
    struct nghttp2_session *h2;
    struct buf out; /* bytes from nghttp2 not yet written, from out_off */
    size_t out_off;
    bool closed; /* no socket or session (yet or any more): the callbacks do nothing */
    const struct grpc_conn_ops *ops;
    void *ud;                    /* the owner's */
    struct grpc_stream *streams; /* from grpc_stream_init() to grpc_stream_release() */
    size_t n_streams;
};

struct grpc_stream {
    struct grpc_conn *c;
    int32_t id;
    void *ud;       /* the owner's */
    struct buf in;  /* the received message(s) with their prefix: at most one message's worth */
    struct buf out; /* framed messages not yet handed to nghttp2, from out_off */
    size_t out_off;
    bool last;          /* a request: END_STREAM with the last byte of out */
    bool responded;     /* response HEADERS (or a Trailers-Only answer) submitted */
    bool deferred;      /* the data provider waits for grpc_stream_send() or the end */
    bool trailers_due;  /* grpc_stream_end() came after HEADERS: trailers when out is empty */
    bool rst_after_end; /* answered before the request ended: RST_STREAM NO_ERROR after */
    int http;           /* :status of a Trailers-Only answer */
    enum grpc_status status;
    char *message;
    struct grpc_stream *prev, *next;
};

/* --- gRPC's framing and encodings (no I/O) --- */

/* The 5-byte prefix of an uncompressed message of `len` bytes. */
void grpc_frame_prefix(uint8_t p[GRPC_PREFIX], size_t len);
/* The message length a prefix announces. */
uint32_t grpc_frame_len(const uint8_t p[GRPC_PREFIX]);
/* `b` holds exactly one whole uncompressed message with its prefix. */
bool grpc_frame_one(const struct buf *b);
/* grpc-message: printable ASCII except '%' stays, everything else is %XX (PROTOCOL-HTTP2); at
 * most GRPC_MESSAGE_MAX bytes of `s`. Returns a new string or NULL (out of memory). */
char *grpc_pct_encode(const char *s);
/* Decodes %XX (an invalid escape stays as it is) into `out`, truncated to fit. */
void grpc_pct_decode(const uint8_t *s, size_t n, char *out, size_t size);
/* A copy of at most GRPC_MESSAGE_MAX bytes of `s`, or NULL. */
char *grpc_dup_capped(const char *s);
/* A header name or value (`len` bytes, not NUL-terminated) equals `want`. */
bool grpc_header_is(const uint8_t *name, size_t len, const char *want);
/* The unix socket address of `path`: 0, or -ENAMETOOLONG (empty or over sun_path) with
 * ret_err (may be NULL). */
int grpc_conn_addr(struct sockaddr_un *sa, const char *path, struct err *ret_err);

/* --- connections --- */

/* Sets up `c` without a socket (closed); `ops` and `ud` are the owner's. Allocates nothing. */
void grpc_conn_init(struct grpc_conn *c, struct ev_loop *loop, const struct grpc_conn_ops *ops,
                    void *ud);
/* The session on the connected non-blocking socket `fd`, a server's or a client's, with its
 * SETTINGS queued (a server's: GRPC_MAX_STREAMS concurrent streams). Returns 0 (`fd` is the
 * connection's from here) or -ENOMEM (`fd` stays the caller's). */
int grpc_conn_open(struct grpc_conn *c, int fd, bool server);
/* Starts reading and writing (the queued SETTINGS go out at once). */
void grpc_conn_start(struct grpc_conn *c);
/* Queues a GOAWAY (NO_ERROR): the connection ends once what is queued is out. `now` tries to
 * write it at once (the caller is about to shut the connection down). */
void grpc_conn_goaway(struct grpc_conn *c, bool now);
/* Stops the watchers, closes the socket and deletes the session (which runs no callbacks);
 * the streams stay the owner's. Idempotent; the memory of `c` stays the owner's. */
void grpc_conn_shutdown(struct grpc_conn *c);

/* --- streams --- */

/* Sets up `st` on `c` (`in` capped at one message with its prefix, `out` at two), listed in
 * c->streams and counted in c->n_streams until grpc_stream_release(). */
void grpc_stream_init(struct grpc_stream *st, struct grpc_conn *c, void *ud);
/* Forgets the stream and frees its buffers (not `st` itself). */
void grpc_stream_release(struct grpc_stream *st);
/* Frames `msg` into st->out: 0, -E2BIG over GRPC_MAX_MESSAGE, -ENOBUFS when the unsent bytes
 * would exceed twice that, -ENOMEM. Sends nothing. */
int grpc_stream_queue(struct grpc_stream *st, const uint8_t *msg, size_t len);
/* Server: queues `msg` and starts the response (HEADERS :status 200, content-type
 * application/grpc, then the messages as DATA) or wakes it up. As grpc_stream_queue(). */
int grpc_stream_send(struct grpc_stream *st, const uint8_t *msg, size_t len);
/* Server: ends the response with grpc-status `status` (and grpc-message when not OK): trailers
 * after the messages when the response has begun, else a Trailers-Only answer with :status
 * `http` (and an RST_STREAM NO_ERROR after it if the request has not ended by then). */
void grpc_stream_end(struct grpc_stream *st, int http, enum grpc_status status,
                     const char *message);
/* Client: submits the request (POST `path`, grpc-timeout from `timeout` seconds) with the
 * queued message as its body, ending the stream with it. 0 or -ENOMEM. */
int grpc_stream_request(struct grpc_stream *st, const char *path, double timeout);
/* Resets the stream with `code`. */
void grpc_stream_reset(struct grpc_stream *st, enum grpc_h2_error code);
