// The hostile guest's own binary (tests/integration/hostile_test.cc): what
// root in a sandbox can do to the agent that busybox cannot. The test
// uploads it through the data plane and runs it as root, as any tenant could.
//
//   hostile-guest-tool garbage BYTES   steals the agent's channel fd (pidfd_getfd
//                                      on PID 1) and writes BYTES of random data
//                                      into it, straight to the host's agent client
//   hostile-guest-tool stop-agent      returns at once; a daemon it leaves behind
//                                      stops PID 1 (the agent) with ptrace once the
//                                      command's exit is reported, keeps it stopped,
//                                      and says so on /dev/console
//
// Static, plain C, system calls only: the guest has busybox and nothing else.
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/random.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif
#ifndef SYS_pidfd_getfd
#define SYS_pidfd_getfd 438
#endif

static int die(const char* what) {
  fprintf(stderr, "hostile-guest-tool: %s: %s\n", what, strerror(errno));
  return 1;
}

// PID 1's fd on the agent's virtio-serial port (/dev/vportNpM).
static int agentPortFd(void) {
  DIR* d = opendir("/proc/1/fd");
  if (!d) return -1;
  int found = -1;
  struct dirent* e;
  while ((e = readdir(d)) != NULL) {
    if (e->d_name[0] == '.') continue;
    char link[64], target[256];
    snprintf(link, sizeof link, "/proc/1/fd/%s", e->d_name);
    ssize_t n = readlink(link, target, sizeof target - 1);
    if (n <= 0) continue;
    target[n] = '\0';
    if (strncmp(target, "/dev/vport", 10) == 0) {
      found = atoi(e->d_name);
      break;
    }
  }
  closedir(d);
  return found;
}

static int garbage(long long bytes) {
  int target = agentPortFd();
  if (target < 0) return die("no virtio port among PID 1's fds");
  int pidfd = (int)syscall(SYS_pidfd_open, 1, 0);
  if (pidfd < 0) return die("pidfd_open(1)");
  int fd = (int)syscall(SYS_pidfd_getfd, pidfd, target, 0);
  if (fd < 0) return die("pidfd_getfd");
  // The agent's fd is non-blocking: wait for room rather than spin.
  fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  char buf[4096];
  printf("writing %lld random bytes into the agent's channel (fd %d of PID 1)\n", bytes, target);
  fflush(stdout);
  while (bytes > 0) {
    size_t n = bytes < (long long)sizeof buf ? (size_t)bytes : sizeof buf;
    if (getrandom(buf, n, 0) != (ssize_t)n) return die("getrandom");
    ssize_t w = write(fd, buf, n);
    if (w <= 0) return die("write to the agent's channel");
    bytes -= w;
  }
  return 0;
}

// Every thread of PID 1, seized and stopped.
static int stopInit(void) {
  DIR* d = opendir("/proc/1/task");
  if (!d) return -1;
  int stopped = 0;
  struct dirent* e;
  while ((e = readdir(d)) != NULL) {
    if (e->d_name[0] == '.') continue;
    pid_t tid = atoi(e->d_name);
    if (ptrace(PTRACE_SEIZE, tid, 0, 0) != 0 || ptrace(PTRACE_INTERRUPT, tid, 0, 0) != 0) continue;
    int status = 0;
    if (waitpid(tid, &status, __WALL) == tid && WIFSTOPPED(status)) ++stopped;
  }
  closedir(d);
  return stopped;
}

static int stopAgent(void) {
  pid_t parent = getpid();
  pid_t child = fork();
  if (child < 0) return die("fork");
  if (child > 0) {
    printf("stopping the agent once this command has ended\n");
    return 0;
  }
  setsid();
  int null = open("/dev/null", O_RDWR);
  dup2(null, 0);
  dup2(null, 1);
  dup2(null, 2);
  // Once the parent is gone and reaped the agent has seen the exit; stopping
  // it earlier would only make the test's own command hang.
  struct timespec tick = {0, 10 * 1000 * 1000};
  while (getppid() == parent) nanosleep(&tick, NULL);
  for (int i = 0; i < 50; ++i) nanosleep(&tick, NULL);
  int n = stopInit();
  int con = open("/dev/console", O_WRONLY | O_NOCTTY);
  if (con >= 0) {
    char msg[96];
    int len = snprintf(msg, sizeof msg, "\nhostile-guest-tool: agent stopped (%d threads)\n", n);
    (void)!write(con, msg, (size_t)len);
    close(con);
  }
  // The tracer must live on: the agent resumes when it goes.
  for (;;) pause();
}

int main(int argc, char** argv) {
  if (argc == 3 && strcmp(argv[1], "garbage") == 0) return garbage(atoll(argv[2]));
  if (argc == 2 && strcmp(argv[1], "stop-agent") == 0) return stopAgent();
  fprintf(stderr, "usage: hostile-guest-tool garbage BYTES | stop-agent\n");
  return 2;
}
