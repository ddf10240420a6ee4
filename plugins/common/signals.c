/*
 * plugins/common/signals.c - aks_signals.h. libc only: the static aksandbox-agent builds it in.
 */
#include <signal.h>
#include <string.h>

#include "aks_signals.h"

void aks__signals_default_all(void)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = SIG_DFL;
	sigemptyset(&sa.sa_mask);
	for (int sig = 1; sig < NSIG; sig++)
		if (sig != SIGKILL && sig != SIGSTOP)
			sigaction(sig, &sa, NULL); /* fails harmlessly for libc-internal signals */
}
