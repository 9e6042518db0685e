/* SPDX-License-Identifier: MIT */
/*
 * http.h - txlgen-server's HTTP side (http.c).
 */
#ifndef TXLGEN_HTTP_H
#define TXLGEN_HTTP_H

#include <sys/socket.h>

struct MHD_Daemon;

/* Listen on @p addr (port 0: any free one, then *@p port); NULL on
 * failure.  /health answers 503 until http_set_ready(). */
struct MHD_Daemon *http_start(const struct sockaddr *addr, int *port);
void http_set_ready(void);
/* The API key requests must bear (NULL: none); kept. */
void http_set_key(char *key);

#endif /* TXLGEN_HTTP_H */
