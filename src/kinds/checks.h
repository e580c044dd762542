/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The pure checks of records the kinds load from an image. Each takes a
 * decoded record, looks at nothing else and changes nothing, and returns
 * NULL when the record is one ckpt could have written, else what is wrong
 * with it (a constant string: "nice is out of range"). The kind's load
 * says which record and task. They live in the kinds' files but are
 * declared here so that tests/unit/test-checks.c can give them forged
 * records.
 */
#ifndef CKPT_KINDS_CHECKS_H
#define CKPT_KINDS_CHECKS_H

#include "core.pb-c.h"
#include "creds.pb-c.h"
#include "files.pb-c.h"
#include "sched.pb-c.h"
#include "signals.pb-c.h"

const char *rlimits_entry_invalid(const RlimitsEntry *e);
const char *signals_entry_invalid(const SignalsEntry *e);
const char *sched_entry_invalid(const SchedEntry *e);
const char *seccomp_entry_invalid(const SeccompEntry *e);
const char *creds_entry_invalid(const CredsEntry *e);
const char *regs_entry_invalid(const RegsEntry *e);
const char *fs_entry_invalid(const FsEntry *e);
/* Not a record: why a task labelled label (len bytes of
 * /proc/PID/attr/current) is refused when ckpt's own is own (NULL:
 * unreadable), or NULL (lsm.c) */
const char *lsm_label_refusal(const char *label, size_t len, const char *own, size_t own_len);

#endif
