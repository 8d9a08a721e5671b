/* agree.h -- what every rank read must be the same on every rank
 * (libtrain/config_agree.c). */
#ifndef ZT_AGREE_H
#define ZT_AGREE_H
#include "comm.h"

/* Collective over g: text is what this rank read, as "key = value" lines
 * (load_rc / st: whether reading it succeeded; text is not looked at when
 * it failed).  Every rank returns the same status: the lowest failing
 * rank's error ("rank R: ..."), or, when the texts differ, ZT_EINVAL
 * "<what>: <key> = <value> on rank R, <value> on rank 0<hint>" for the
 * lowest rank R whose text differs from rank 0's and its first differing
 * line.  With one rank: load_rc. */
int zt_agree_text(zt_group *g, const char *what, const char *hint, const char *text,
                  int load_rc, zt_status *st);

#endif
