/*
 * tests/integration/pid_check.h - is a process still running?
 */
#ifndef AKS_TEST_PID_CHECK_H
#define AKS_TEST_PID_CHECK_H

#include <stdbool.h>
#include <sys/types.h>

/* Running (or stopped): not gone, and not a zombie. A zombie has stopped
 * running for good; whether its new parent (init, here possibly a process
 * that reaps slowly) has collected it yet is not ours to wait for. */
bool test_pid_alive(pid_t pid);

#endif /* AKS_TEST_PID_CHECK_H */
