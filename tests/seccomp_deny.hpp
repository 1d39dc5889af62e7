// Fault injection for the fallbacks that engram takes where a container's
// seccomp profile forbids a system call (Docker's default profile denies
// io_uring_setup, for one): from the call on, system call `nr` fails with
// `err` in the calling thread and in every thread it starts later, as such
// a profile makes it fail. There is no way back, so tests call it in a
// child process: a fork, or this test binary run again on one test.
#pragma once

#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/prctl.h>

#include <cerrno>
#include <cstddef>
#include <string>

namespace engram::test {

#if defined(__x86_64__)
inline constexpr unsigned kAuditArch = AUDIT_ARCH_X86_64;
#elif defined(__aarch64__)
inline constexpr unsigned kAuditArch = AUDIT_ARCH_AARCH64;
#else
#error "seccomp_deny.hpp: add this architecture's AUDIT_ARCH_ value"
#endif

// "" once the filter is in, else what the kernel refused. With
// `kill_unless_arg0`, a call of `nr` whose first argument (its low 32 bits)
// differs from it kills the process instead: for a test that code stops at
// a refused query (membarrier's MEMBARRIER_CMD_QUERY, say) and never makes
// the calls it asked about, which would fail silently otherwise.
inline std::string deny_syscall(long nr, int err, long kill_unless_arg0 = -1) {
  const unsigned deny = SECCOMP_RET_ERRNO | (static_cast<unsigned>(err) & SECCOMP_RET_DATA);
  const bool strict = kill_unless_arg0 >= 0;
  sock_filter filter[] = {
      // A call from another ABI than this binary's (x32, i386) is let through.
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, arch)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, kAuditArch, 1, 0),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, static_cast<unsigned>(nr), 1, 0),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, args[0])),  // little-endian: the low word
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, static_cast<unsigned>(kill_unless_arg0), 0, 1),
      BPF_STMT(BPF_RET | BPF_K, deny),
      BPF_STMT(BPF_RET | BPF_K, strict ? SECCOMP_RET_KILL_PROCESS : deny),
  };
  sock_fprog prog{static_cast<unsigned short>(sizeof filter / sizeof filter[0]), filter};
  // Without privileges, a filter needs no_new_privs (and keeps it).
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return "prctl(PR_SET_NO_NEW_PRIVS) failed, errno " + std::to_string(errno);
  if (prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) != 0)
    return "prctl(PR_SET_SECCOMP) failed, errno " + std::to_string(errno);
  return "";
}

}  // namespace engram::test
