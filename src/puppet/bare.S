/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The bare puppet's program (puppet_spawn, puppet.c): a whole x86-64 ELF
 * executable, 185 bytes, kept as data in ckpt's .rodata and run from a
 * memfd. It loops in pause() until ckpt seizes it; every signal is
 * blocked when it starts (spawn_bare), so nothing but SIGKILL ends the wait.
 *
 * Exec'd, a puppet has four small mappings (this program, its stack, the
 * vDSO and vvar) instead of a fork's copy of ckpt: nothing to copy
 * at the clone, no copy-on-write fault in ckpt or in the puppet after it,
 * and little to unmap when its own memory is rebuilt.
 *
 * Loaded at BARE_BASE, below 4 GiB, where mm's scratch area never goes
 * (mm.c find_gap starts at 4 GiB). One PT_LOAD (read and execute: the
 * headers, the code) and a PT_GNU_STACK that asks for a stack that is
 * not executable.
 */
#define BARE_BASE 0x10000000

	.section .rodata
	.balign 16
	.globl ckpt_bare_elf
	.globl ckpt_bare_elf_len
	.hidden ckpt_bare_elf
	.hidden ckpt_bare_elf_len
ckpt_bare_elf:
	/* Elf64_Ehdr */
	.byte 0x7f, 'E', 'L', 'F'
	.byte 2, 1, 1, 0		/* 64-bit, little endian, version 1, SysV */
	.quad 0
	.short 2			/* e_type: ET_EXEC */
	.short 62			/* e_machine: EM_X86_64 */
	.long 1				/* e_version */
	.quad BARE_BASE + (entry - ckpt_bare_elf)	/* e_entry */
	.quad phdrs - ckpt_bare_elf	/* e_phoff */
	.quad 0				/* e_shoff: no sections */
	.long 0				/* e_flags */
	.short 64			/* e_ehsize */
	.short 56			/* e_phentsize */
	.short 2			/* e_phnum */
	.short 64			/* e_shentsize */
	.short 0			/* e_shnum */
	.short 0			/* e_shstrndx */
phdrs:
	/* PT_LOAD: the whole file, read and execute */
	.long 1
	.long 5				/* PF_R | PF_X */
	.quad 0				/* p_offset */
	.quad BARE_BASE			/* p_vaddr */
	.quad BARE_BASE			/* p_paddr */
	.quad end - ckpt_bare_elf	/* p_filesz */
	.quad end - ckpt_bare_elf	/* p_memsz */
	.quad 0x1000			/* p_align */
	/* PT_GNU_STACK: read and write, not execute */
	.long 0x6474e551
	.long 6				/* PF_R | PF_W */
	.quad 0, 0, 0, 0, 0
	.quad 16
entry:
	mov $34, %eax			/* pause */
	syscall
	jmp entry
end:
ckpt_bare_elf_len:
	.quad end - ckpt_bare_elf

	.section .note.GNU-stack, "", @progbits
