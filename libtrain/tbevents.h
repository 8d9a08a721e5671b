/* tbevents.h -- TensorBoard event files (ztrain.tensorboard.dir), written by
 * hand: TFRecord framing (length, masked CRC32C of the length, data, masked
 * CRC32C of the data) around tensorflow.Event messages in protobuf wire
 * format: a first Event{wall_time, file_version "brain.Event:2"}, then one
 * Event{wall_time, step, summary{value{tag, simple_value}}} per scalar.  No
 * protobuf library.  Rank 0 writes; see train.c. */
#ifndef ZT_TBEVENTS_H
#define ZT_TBEVENTS_H
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include "ztrain.h"

/* CRC-32C (Castagnoli, reflected 0x82F63B78) of n bytes, and TFRecord's mask
 * of it: ((c >> 15) | (c << 17)) + 0xa282ead8. */
uint32_t zt_crc32c(const void *p, size_t n);
uint32_t zt_crc32c_mask(uint32_t crc);

/* One Event record's protobuf bytes into buf (cap >= 64 + strlen(tag)
 * suffices): a scalar event (tag != NULL) or the file_version event (tag ==
 * NULL).  Returns the length, 0 when it does not fit. */
size_t zt_tb_event(uint8_t *buf, size_t cap, double wall_time, long step, const char *tag,
                   float value);

/* A SessionLog START event at STEP (Event.session_log{status START}): what
 * TensorBoard's reader takes for a restart, dropping the events of steps >=
 * STEP that came before it (an interrupted run's steps past its checkpoint). */
size_t zt_tb_event_start(uint8_t *buf, size_t cap, double wall_time, long step);

typedef struct zt_tb {
    FILE *fp;
    char path[4096 + 96];
    int failed;         /* a write failed (the caller warns once) */
} zt_tb;

/* Create PATH and write its file_version record at wall_time. */
int zt_tb_open_file(zt_tb *tb, const char *path, double wall_time, zt_status *st);
/* A new events file in DIR (created with its parents when missing), named as
 * TensorBoard expects: events.out.tfevents.<seconds>.<host>.<pid>.<n>. */
int zt_tb_open_dir(zt_tb *tb, const char *dir, double wall_time, zt_status *st);
/* One scalar; returns 0, or -1 when the write failed (tb->failed is set). */
int zt_tb_scalar(zt_tb *tb, const char *tag, long step, double value, double wall_time);
/* The restart marker (zt_tb_event_start); 0 or -1 as zt_tb_scalar. */
int zt_tb_start(zt_tb *tb, long step, double wall_time);
int zt_tb_flush(zt_tb *tb);
int zt_tb_close(zt_tb *tb);

#endif
