/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Registers. One asm block loads known random values into the callee-
 * and syscall-preserved general registers (rbx, rdx, rsi, r8-r10, r12-r15),
 * the vector registers (zmm0-31 and k1-k7 with AVX-512, else ymm0-15 with
 * AVX, else xmm0-15) and three x87 stack registers, then loops on the raw
 * pause system call until SIGUSR1 set test_woken, and stores them all
 * back. The checkpoint happens inside that loop. MXCSR and the x87 control
 * word are set to non-default values (rounding toward zero, FTZ/DAZ) and
 * compared too. (A signal handler does not disturb any of this: the kernel
 * saves and restores the whole register state around it.)
 */
#include "lib.h"

#include <cpuid.h>
#include <stddef.h>
#include <string.h>
#include <sys/syscall.h>

#define NGP 10
static const char *const gp_names[NGP] = {"rbx", "rdx", "rsi", "r8",  "r9",
					  "r10", "r12", "r13", "r14", "r15"};

struct regs {
	unsigned char vin[32][64];
	unsigned char vout[32][64];
	uint64_t kin[8], kout[8];
	uint64_t gin[NGP], gout[NGP];
	int64_t xin[3], xout[3];
	volatile sig_atomic_t *flag;
} __attribute__((aligned(64)));

static struct regs R;

#define GP_IN                                                 \
	"mov %c[gin]+0(%%rdi), %%rbx\n\t"                     \
	"mov %c[gin]+8(%%rdi), %%rdx\n\t"                     \
	"mov %c[gin]+16(%%rdi), %%rsi\n\t"                    \
	"mov %c[gin]+24(%%rdi), %%r8\n\t"                     \
	"mov %c[gin]+32(%%rdi), %%r9\n\t"                     \
	"mov %c[gin]+40(%%rdi), %%r10\n\t"                    \
	"mov %c[gin]+48(%%rdi), %%r12\n\t"                    \
	"mov %c[gin]+56(%%rdi), %%r13\n\t"                    \
	"mov %c[gin]+64(%%rdi), %%r14\n\t"                    \
	"mov %c[gin]+72(%%rdi), %%r15\n\t"                    \
	"fildq %c[xin]+0(%%rdi)\n\t"                          \
	"fildq %c[xin]+8(%%rdi)\n\t"                          \
	"fildq %c[xin]+16(%%rdi)\n\t"
#define GP_OUT                                                \
	"fistpq %c[xout]+16(%%rdi)\n\t"                       \
	"fistpq %c[xout]+8(%%rdi)\n\t"                        \
	"fistpq %c[xout]+0(%%rdi)\n\t"                        \
	"mov %%rbx, %c[gout]+0(%%rdi)\n\t"                    \
	"mov %%rdx, %c[gout]+8(%%rdi)\n\t"                    \
	"mov %%rsi, %c[gout]+16(%%rdi)\n\t"                   \
	"mov %%r8, %c[gout]+24(%%rdi)\n\t"                    \
	"mov %%r9, %c[gout]+32(%%rdi)\n\t"                    \
	"mov %%r10, %c[gout]+40(%%rdi)\n\t"                   \
	"mov %%r12, %c[gout]+48(%%rdi)\n\t"                   \
	"mov %%r13, %c[gout]+56(%%rdi)\n\t"                   \
	"mov %%r14, %c[gout]+64(%%rdi)\n\t"                   \
	"mov %%r15, %c[gout]+72(%%rdi)\n\t"
/* pause() until *flag; only rax, rcx and r11 are touched */
#define WAIT_LOOP                                             \
	"1:\n\t"                                              \
	"mov $" SYS_PAUSE_STR ", %%eax\n\t"                   \
	"syscall\n\t"                                         \
	"mov %c[flag](%%rdi), %%rax\n\t"                      \
	"cmpl $0, (%%rax)\n\t"                                \
	"je 1b\n\t"
#define STR_(x) #x
#define STR(x) STR_(x)
#define SYS_PAUSE_STR STR(__NR_pause)

#define OPERANDS                                                                              \
	: : "D"(&R), [vin] "i"(offsetof(struct regs, vin)),                                   \
	    [vout] "i"(offsetof(struct regs, vout)), [kin] "i"(offsetof(struct regs, kin)),   \
	    [kout] "i"(offsetof(struct regs, kout)), [gin] "i"(offsetof(struct regs, gin)),   \
	    [gout] "i"(offsetof(struct regs, gout)), [xin] "i"(offsetof(struct regs, xin)),   \
	    [xout] "i"(offsetof(struct regs, xout)), [flag] "i"(offsetof(struct regs, flag))  \
	: "rax", "rbx", "rcx", "rdx", "rsi", "r8", "r9", "r10", "r11", "r12", "r13", "r14",   \
	  "r15", "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8",      \
	  "xmm9", "xmm10", "xmm11", "xmm12", "xmm13", "xmm14", "xmm15", "memory", "cc"

#define V16(op, fmt)                                                                          \
	fmt(op, 0) fmt(op, 1) fmt(op, 2) fmt(op, 3) fmt(op, 4) fmt(op, 5) fmt(op, 6) fmt(op, 7)  \
	fmt(op, 8) fmt(op, 9) fmt(op, 10) fmt(op, 11) fmt(op, 12) fmt(op, 13) fmt(op, 14)       \
	fmt(op, 15)
#define V32(op, fmt)                                                                          \
	V16(op, fmt) fmt(op, 16) fmt(op, 17) fmt(op, 18) fmt(op, 19) fmt(op, 20) fmt(op, 21)  \
	fmt(op, 22) fmt(op, 23) fmt(op, 24) fmt(op, 25) fmt(op, 26) fmt(op, 27) fmt(op, 28)    \
	fmt(op, 29) fmt(op, 30) fmt(op, 31)
#define LD_X(op, n) op " %c[vin]+" #n "*64(%%rdi), %%xmm" #n "\n\t"
#define ST_X(op, n) op " %%xmm" #n ", %c[vout]+" #n "*64(%%rdi)\n\t"
#define LD_Y(op, n) op " %c[vin]+" #n "*64(%%rdi), %%ymm" #n "\n\t"
#define ST_Y(op, n) op " %%ymm" #n ", %c[vout]+" #n "*64(%%rdi)\n\t"
#define LD_Z(op, n) op " %c[vin]+" #n "*64(%%rdi), %%zmm" #n "\n\t"
#define ST_Z(op, n) op " %%zmm" #n ", %c[vout]+" #n "*64(%%rdi)\n\t"
#define K7(op)                                                                     \
	op(1) op(2) op(3) op(4) op(5) op(6) op(7)
#define LD_K(n) "kmovq %c[kin]+" #n "*8(%%rdi), %%k" #n "\n\t"
#define ST_K(n) "kmovq %%k" #n ", %c[kout]+" #n "*8(%%rdi)\n\t"

static void run_sse(void)
{
	asm volatile(GP_IN V16("movdqu", LD_X) WAIT_LOOP V16("movdqu", ST_X) GP_OUT OPERANDS);
}

static void run_avx(void)
{
	asm volatile(GP_IN V16("vmovdqu", LD_Y) WAIT_LOOP V16("vmovdqu", ST_Y)
		     "vzeroupper\n\t" GP_OUT OPERANDS);
}

static void run_avx512(void)
{
	asm volatile(GP_IN V32("vmovdqu64", LD_Z) K7(LD_K) WAIT_LOOP V32("vmovdqu64", ST_Z)
		     K7(ST_K) "vzeroupper\n\t" GP_OUT OPERANDS);
}

static uint64_t xgetbv0(void)
{
	uint32_t lo, hi;
	asm volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
	return (uint64_t)hi << 32 | lo;
}

/* 0 sse, 1 avx, 2 avx-512 */
static int vector_level(void)
{
	unsigned a, b, c, d;
	if (!__get_cpuid(1, &a, &b, &c, &d))
		return 0;
	if (!(c & bit_OSXSAVE) || !(c & bit_AVX) || (xgetbv0() & 6) != 6)
		return 0;
	if (__get_cpuid_count(7, 0, &a, &b, &c, &d) && (b & bit_AVX512F) && (b & bit_AVX512BW) &&
	    (xgetbv0() & 0xe6) == 0xe6)
		return 2;
	return 1;
}

int main(void)
{
	static const char *const level_names[] = {"sse (xmm0-15)", "avx (ymm0-15)",
						  "avx-512 (zmm0-31, k1-7)"};
	const int level = vector_level();
	test_log("vector registers: %s", level_names[level]);
	uint64_t st = 0xc0ffee;
	test_fill_random(R.vin, sizeof(R.vin), 77);
	memset(R.vout, 0, sizeof(R.vout));
	for (int i = 0; i < 8; i++)
		R.kin[i] = test_splitmix(&st);
	for (int i = 0; i < NGP; i++)
		R.gin[i] = test_splitmix(&st);
	for (int i = 0; i < 3; i++)
		R.xin[i] = (int64_t)(test_splitmix(&st) >> 12) - (1ll << 50);
	R.flag = &test_woken;

	const uint32_t mxcsr_in = 0x1f80 | (3u << 13) | (1u << 15) | (1u << 6);
	const uint16_t fcw_in = 0x0f7f;
	asm volatile("ldmxcsr %0" : : "m"(mxcsr_in));
	asm volatile("fldcw %0" : : "m"(fcw_in));

	test_ready();
	if (level == 2)
		run_avx512();
	else if (level == 1)
		run_avx();
	else
		run_sse();
	uint32_t mxcsr_out;
	uint16_t fcw_out;
	asm volatile("stmxcsr %0" : "=m"(mxcsr_out));
	asm volatile("fnstcw %0" : "=m"(fcw_out));
	test_check_common();

	for (int i = 0; i < NGP; i++)
		expect(R.gout[i] == R.gin[i], "%s is %#llx, was %#llx", gp_names[i],
		       (unsigned long long)R.gout[i], (unsigned long long)R.gin[i]);
	const int nvec = level == 2 ? 32 : 16, vlen = level == 2 ? 64 : level == 1 ? 32 : 16;
	const char *vname = level == 2 ? "zmm" : level == 1 ? "ymm" : "xmm";
	for (int i = 0; i < nvec; i++)
		expect(!memcmp(R.vout[i], R.vin[i], (size_t)vlen), "%s%d differs", vname, i);
	if (level == 2)
		for (int i = 1; i < 8; i++)
			expect(R.kout[i] == R.kin[i], "k%d is %#llx, was %#llx", i,
			       (unsigned long long)R.kout[i], (unsigned long long)R.kin[i]);
	for (int i = 0; i < 3; i++)
		expect(R.xout[i] == R.xin[i], "x87 st(%d) is %lld, was %lld", 2 - i,
		       (long long)R.xout[i], (long long)R.xin[i]);
	expect(mxcsr_out == mxcsr_in, "mxcsr is %#x, was %#x", mxcsr_out, mxcsr_in);
	expect(fcw_out == fcw_in, "x87 control word is %#x, was %#x", fcw_out, fcw_in);
	pass();
}
