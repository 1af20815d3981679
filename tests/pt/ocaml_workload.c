// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Test only: OCaml-style exception handling in assembly, with the
 * .note.ocaml_eh note the flambda-backend compiler writes, for the PT call
 * stack tests. r14 holds the trap pointer, as in OCaml's amd64 backend: a
 * push-trap pushes the handler's address and the previous trap pointer; a
 * raise restores the stack from the trap pointer, pops the previous one and
 * jumps to the handler (the enter-trap).
 *
 * caml_entry(1) pushes a trap and calls caml_entry(0), which calls
 * caml_f -> caml_g -> caml_raise: the raise lands in the outer caml_entry,
 * so the inner caml_entry, caml_f, caml_g and caml_raise must all close.
 * Before that, caml_try pushes and pops a trap of its own without a raise.
 */
#define NOINLINE __attribute__((noinline))

NOINLINE void ht_trace_start(void)
{
	__asm__ volatile("" ::: "memory");
}

NOINLINE void ht_trace_stop(void)
{
	__asm__ volatile("" ::: "memory");
}

void caml_entry(long with_trap);

__asm__(".text\n"
	".globl caml_leaf\n.type caml_leaf, @function\n"
	"caml_leaf:\n"
	"	lea 1(%rdi), %rax\n"
	"	ret\n"
	".size caml_leaf, .-caml_leaf\n"

	".globl caml_after_raise\n.type caml_after_raise, @function\n"
	"caml_after_raise:\n"
	"	mov $2, %eax\n"
	"	ret\n"
	".size caml_after_raise, .-caml_after_raise\n"

	".globl caml_raise\n.type caml_raise, @function\n"
	"caml_raise:\n"
	"	mov %r14, %rsp\n"
	"	pop %r14\n"
	"	pop %r11\n"
	"	jmp *%r11\n"
	".size caml_raise, .-caml_raise\n"

	".globl caml_g\n.type caml_g, @function\n"
	"caml_g:\n"
	"	push %rbp\n"
	"	mov %rsp, %rbp\n"
	"	call caml_raise\n"
	"	pop %rbp\n"
	"	ret\n"
	".size caml_g, .-caml_g\n"

	".globl caml_f\n.type caml_f, @function\n"
	"caml_f:\n"
	"	push %rbp\n"
	"	mov %rsp, %rbp\n"
	"	call caml_g\n"
	"	pop %rbp\n"
	"	ret\n"
	".size caml_f, .-caml_f\n"

	".globl caml_try\n.type caml_try, @function\n"
	"caml_try:\n"
	"	push %rbp\n"
	"	mov %rsp, %rbp\n"
	"	lea .Lcaml_handler2(%rip), %rax\n"
	".Lcaml_push2:\n"
	"	push %rax\n"
	"	push %r14\n"
	"	mov %rsp, %r14\n"
	"	mov $5, %edi\n"
	"	call caml_leaf\n"
	".Lcaml_pop2:\n"
	"	pop %r14\n"
	"	add $8, %rsp\n"
	"	jmp 1f\n"
	".Lcaml_handler2:\n"
	"	xor %eax, %eax\n"
	"1:\n"
	"	pop %rbp\n"
	"	ret\n"
	".size caml_try, .-caml_try\n"

	".globl caml_entry\n.type caml_entry, @function\n"
	"caml_entry:\n"
	"	push %rbp\n"
	"	mov %rsp, %rbp\n"
	"	push %r14\n"
	"	push %rbx\n"
	"	test %rdi, %rdi\n"
	"	jz 2f\n"
	"	call caml_try\n"
	"	lea .Lcaml_handler1(%rip), %rax\n"
	".Lcaml_push1:\n"
	"	push %rax\n"
	"	push %r14\n"
	"	mov %rsp, %r14\n"
	"	xor %edi, %edi\n"
	"	call caml_entry\n"
	".Lcaml_pop1:\n"
	"	pop %r14\n"
	"	add $8, %rsp\n"
	"	jmp 3f\n"
	".Lcaml_handler1:\n"
	"	call caml_after_raise\n"
	"	jmp 3f\n"
	"2:\n"
	"	call caml_f\n"
	"3:\n"
	"	pop %rbx\n"
	"	pop %r14\n"
	"	pop %rbp\n"
	"	ret\n"
	".size caml_entry, .-caml_entry\n"

	/* The note: recorded base, enter-traps, push-traps, pop-traps. */
	".section .note.ocaml_eh, \"\", @note\n"
	".balign 4\n"
	".long 6\n"
	".long 4f - 3f\n"
	".long 1\n"
	".asciz \"OCaml\"\n"
	".balign 4\n"
	"3:\n"
	".quad _.stapsdt.base\n"
	".quad .Lcaml_handler1, .Lcaml_handler2, 0\n"
	".quad .Lcaml_push1, .Lcaml_push2, 0\n"
	".quad .Lcaml_pop1, .Lcaml_pop2, 0\n"
	"4:\n"
	".balign 4\n"
	".section .stapsdt.base, \"aG\", @progbits, .stapsdt.base, comdat\n"
	".weak _.stapsdt.base\n"
	".hidden _.stapsdt.base\n"
	"_.stapsdt.base:\n"
	".space 1\n"
	".text\n");

int main(void)
{
	ht_trace_start();
	caml_entry(1);
	ht_trace_stop();
	return 0;
}
