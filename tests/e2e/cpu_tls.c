/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The fs and gs bases. fs points at the thread's TCB (TLS variables live
 * below it); gs is set with ARCH_SET_GS to a page holding a marker. After
 * restore both bases are unchanged (arch_prctl), are in effect (%fs:0 is
 * the TCB's self pointer, %gs:0 reads the marker), pthread_self() is
 * unchanged and TLS variables hold their values at the same addresses.
 */
#include "lib.h"

#include <asm/prctl.h>
#include <pthread.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

static __thread uint64_t tls_data[64];
static __thread int tls_init = 4242;

static unsigned long get_base(int code)
{
	unsigned long v = 0;
	if (syscall(SYS_arch_prctl, code, &v))
		fail("arch_prctl(%#x): %m", code);
	return v;
}

static uint64_t fs0(void)
{
	uint64_t v;
	asm volatile("mov %%fs:0, %0" : "=r"(v));
	return v;
}

static uint64_t gs0(void)
{
	uint64_t v;
	asm volatile("mov %%gs:0, %0" : "=r"(v));
	return v;
}

int main(void)
{
	for (int i = 0; i < 64; i++)
		tls_data[i] = 0x7153000000000000ull + (uint64_t)i * 0x10001;
	tls_init++;
	uint64_t *gspage = test_mmap(NULL, 4096, PROT_READ | PROT_WRITE,
				     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	gspage[0] = 0x6565deadbeef6565ull;
	if (syscall(SYS_arch_prctl, ARCH_SET_GS, (unsigned long)gspage))
		fail("ARCH_SET_GS: %m");
	const unsigned long fs = get_base(ARCH_GET_FS), gs = get_base(ARCH_GET_GS);
	const pthread_t self = pthread_self();
	const uintptr_t tls_addr = (uintptr_t)tls_data;
	if (gs != (unsigned long)gspage || gs0() != gspage[0] || fs0() != fs)
		fail("fs/gs do not behave as expected before the checkpoint");

	test_ready();
	test_wait();

	unsigned long fs2 = get_base(ARCH_GET_FS), gs2 = get_base(ARCH_GET_GS);
	expect(fs2 == fs, "fs base is %#lx, was %#lx", fs2, fs);
	expect(gs2 == gs, "gs base is %#lx, was %#lx", gs2, gs);
	expect(fs0() == fs, "%%fs:0 is %#llx, not the fs base", (unsigned long long)fs0());
	expect(gs2 == gs && gs0() == gspage[0], "%%gs:0 does not read the marker");
	expect(pthread_equal(pthread_self(), self), "pthread_self() changed");
	expect((uintptr_t)tls_data == tls_addr, "TLS variable moved from %#lx to %p",
	       (unsigned long)tls_addr, (void *)tls_data);
	int bad = 0;
	for (int i = 0; i < 64; i++)
		bad += tls_data[i] != 0x7153000000000000ull + (uint64_t)i * 0x10001;
	expect(!bad, "%d TLS words differ", bad);
	expect(tls_init == 4243, "initialised TLS variable is %d, want 4243", tls_init);
	pass();
}
