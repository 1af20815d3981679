// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Copies stdin to qemu's isa-debugcon port, the kernel matrix's channel from
 * the guest to the host: one port write per byte, no UART, no interrupts, so
 * binary data goes out several times faster than through a second serial port.
 * Built static: the initramfs has no libc of its own for it.
 */
#include <stdio.h>
#include <sys/io.h>
#include <unistd.h>

#define HT_DEBUGCON_PORT 0x402

int main(void)
{
	unsigned char buf[65536];
	ssize_t n;

	if (ioperm(HT_DEBUGCON_PORT, 1, 1)) {
		perror("ht_port: ioperm");
		return 1;
	}
	while ((n = read(0, buf, sizeof(buf))) > 0)
		outsb(HT_DEBUGCON_PORT, buf, (unsigned long)n);
	if (n < 0) {
		perror("ht_port: read");
		return 1;
	}
	return 0;
}
