/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * A boot sector for real_qemu_tcg: the guest writes the digits 0-9 in a
 * loop to COM1, with a delay loop between two. Whoever reads the serial
 * port sees every digit follow the one before: a break in the sequence is
 * guest state lost. Assembled by the runner (gcc -c, ld --oformat binary).
 */
.code16
.globl _start
_start:
	cli
	xor %ax, %ax
	mov %ax, %ds
	mov $'0', %bl
1:	mov $0x3f8, %dx
	mov %bl, %al
	out %al, %dx
	inc %bl
	cmp $'9'+1, %bl
	jne 2f
	mov $'0', %bl
2:	mov $0x2000, %cx
3:	push %cx
	mov $0x40, %cx
4:	loop 4b
	pop %cx
	loop 3b
	jmp 1b
.org 510
.word 0xaa55
