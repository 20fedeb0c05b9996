/**
 * The seccomp filter of sandboxed R: a classic-BPF program that bubblewrap loads (`--seccomp FD`)
 * just before it starts R, so it holds for R and everything R starts. It refuses the system calls
 * that let one process of a sandbox reach into another one of the same user (a job into its fork
 * server), the kernel keyring and SysV IPC (state that outlives a job in a slot's sandbox), new
 * namespaces, and a few kernel interfaces R never uses that are common ways into kernel bugs.
 * Everything else is allowed: the sandbox's namespaces and the user it runs as are the main walls.
 */

/** The architectures the filter knows; R elsewhere runs without one. */
export type SeccompArch = 'x86_64' | 'aarch64';

/** `seccomp_data.arch` values (AUDIT_ARCH_*, linux/audit.h). */
const AUDIT_ARCH: Record<SeccompArch, number> = { x86_64: 0xc000003e, aarch64: 0xc00000b7 };

/**
 * Syscall numbers: x86_64 from asm/unistd_64.h, aarch64 from the asm-generic table
 * (asm-generic/unistd.h).
 */
const SYSCALLS = {
  ptrace: { x86_64: 101, aarch64: 117 },
  process_vm_readv: { x86_64: 310, aarch64: 270 },
  process_vm_writev: { x86_64: 311, aarch64: 271 },
  pidfd_getfd: { x86_64: 438, aarch64: 438 },
  process_madvise: { x86_64: 440, aarch64: 440 },
  kcmp: { x86_64: 312, aarch64: 272 },
  add_key: { x86_64: 248, aarch64: 217 },
  request_key: { x86_64: 249, aarch64: 218 },
  keyctl: { x86_64: 250, aarch64: 219 },
  shmget: { x86_64: 29, aarch64: 194 },
  semget: { x86_64: 64, aarch64: 190 },
  msgget: { x86_64: 68, aarch64: 186 },
  unshare: { x86_64: 272, aarch64: 97 },
  setns: { x86_64: 308, aarch64: 268 },
  clone: { x86_64: 56, aarch64: 220 },
  clone3: { x86_64: 435, aarch64: 435 },
  personality: { x86_64: 135, aarch64: 92 },
  kexec_load: { x86_64: 246, aarch64: 104 },
  kexec_file_load: { x86_64: 320, aarch64: 294 },
  bpf: { x86_64: 321, aarch64: 280 },
  perf_event_open: { x86_64: 298, aarch64: 241 },
  userfaultfd: { x86_64: 323, aarch64: 282 },
  io_uring_setup: { x86_64: 425, aarch64: 425 },
  io_uring_enter: { x86_64: 426, aarch64: 426 },
  io_uring_register: { x86_64: 427, aarch64: 427 },
} as const satisfies Record<string, Record<SeccompArch, number>>;

export type SyscallName = keyof typeof SYSCALLS;

/** Refused outright with EPERM, and why R can do without each. */
export const REFUSED: readonly SyscallName[] = [
  // Reading or writing another process (a job its fork server): debuggers only.
  'ptrace',
  'process_vm_readv',
  'process_vm_writev',
  'pidfd_getfd',
  'process_madvise',
  'kcmp',
  // The kernel keyring outlives a job and is shared by the sandbox's processes.
  'add_key',
  'request_key',
  'keyctl',
  // SysV IPC objects live as long as the sandbox's IPC namespace (a slot's, across jobs) and
  // outside a job's memory limit; R uses none (its parallel package uses pipes and fork).
  'shmget',
  'semget',
  'msgget',
  // New namespaces (a user namespace gives capabilities over a new mount table) or joining one.
  'unshare',
  'setns',
  // Need privileges the sandbox never has; refused before the kernel looks at them.
  'kexec_load',
  'kexec_file_load',
  // Kernel interfaces behind many local privilege escalations, unused by R and the tools it calls:
  // eBPF programs, perf counters (also a side channel), userfaultfd (stalls the kernel in a race
  // at will), io_uring.
  'bpf',
  'perf_event_open',
  'userfaultfd',
  'io_uring_setup',
  'io_uring_enter',
  'io_uring_register',
];

/** clone() flags that make a namespace (CLONE_NEWNS, …CGROUP, …UTS, …IPC, …USER, …PID, …NET). */
export const CLONE_NAMESPACE_FLAGS = 0x7e020000;
/** personality() arguments that are allowed: PER_LINUX, and 0xffffffff, which only queries. */
const PERSONALITY_ALLOWED = [0, 0xffffffff];
/** x86_64 syscall numbers with this bit belong to the x32 ABI, which R never uses. */
const X32_SYSCALL_BIT = 0x40000000;

export const SECCOMP_RET_ALLOW = 0x7fff0000;
export const SECCOMP_RET_ERRNO = 0x00050000;
export const EPERM = 1;
export const ENOSYS = 38;

// Classic BPF opcodes (linux/bpf_common.h).
const LD_W_ABS = 0x20; // BPF_LD | BPF_W | BPF_ABS
const JEQ_K = 0x15; // BPF_JMP | BPF_JEQ | BPF_K
const JGE_K = 0x35; // BPF_JMP | BPF_JGE | BPF_K
const JSET_K = 0x45; // BPF_JMP | BPF_JSET | BPF_K
const RET_K = 0x06; // BPF_RET | BPF_K

// Offsets in struct seccomp_data: nr, arch, then args[0] (its low 32 bits on little-endian).
const OFFSET_NR = 0;
const OFFSET_ARCH = 4;
const OFFSET_ARG0_LOW = 16;

type Instruction = [code: number, jt: number, jf: number, k: number];

/** The filter's architecture for a Node `process.arch`, or null when it has none. */
export function seccompArchOf(nodeArch: string): SeccompArch | null {
  return nodeArch === 'x64' ? 'x86_64' : nodeArch === 'arm64' ? 'aarch64' : null;
}

/**
 * The filter for one architecture as bubblewrap reads it: an array of `struct sock_filter`
 * (u16 code, u8 jt, u8 jf, u32 k), little-endian, 8 bytes each.
 */
export function seccompProgram(arch: SeccompArch): Buffer {
  const errno = (code: number): Instruction => [RET_K, 0, 0, SECCOMP_RET_ERRNO | code];
  const allow: Instruction = [RET_K, 0, 0, SECCOMP_RET_ALLOW];
  const loadNr: Instruction = [LD_W_ABS, 0, 0, OFFSET_NR];
  const loadArg0: Instruction = [LD_W_ABS, 0, 0, OFFSET_ARG0_LOW];
  // A jump skips the given number of instructions when the test fails (jf) or succeeds (jt).
  const ifNot = (nr: number, skip: number): Instruction => [JEQ_K, 0, skip, nr];
  const program: Instruction[] = [
    // Another ABI of the same kernel (i386 on x86_64, arm32 on aarch64) numbers calls otherwise.
    [LD_W_ABS, 0, 0, OFFSET_ARCH],
    [JEQ_K, 1, 0, AUDIT_ARCH[arch]],
    errno(ENOSYS),
    loadNr,
  ];
  if (arch === 'x86_64') {
    program.push([JGE_K, 0, 1, X32_SYSCALL_BIT], errno(ENOSYS));
  }
  for (const name of REFUSED) {
    program.push(ifNot(SYSCALLS[name][arch], 1), errno(EPERM));
  }
  // clone3 passes its flags in memory the filter cannot read: ENOSYS makes glibc use clone.
  program.push(ifNot(SYSCALLS.clone3[arch], 1), errno(ENOSYS));
  program.push(
    ifNot(SYSCALLS.clone[arch], 4),
    loadArg0,
    [JSET_K, 0, 1, CLONE_NAMESPACE_FLAGS],
    errno(EPERM),
    allow,
  );
  // Execution domains can turn off address-space randomisation for what the job runs next.
  program.push(
    ifNot(SYSCALLS.personality[arch], 5),
    loadArg0,
    [JEQ_K, 1, 0, PERSONALITY_ALLOWED[0]],
    [JEQ_K, 0, 1, PERSONALITY_ALLOWED[1]],
    allow,
    errno(EPERM),
  );
  program.push(allow);
  const bytes = Buffer.alloc(program.length * 8);
  program.forEach(([code, jt, jf, k], index) => {
    bytes.writeUInt16LE(code, index * 8);
    bytes.writeUInt8(jt, index * 8 + 2);
    bytes.writeUInt8(jf, index * 8 + 3);
    bytes.writeUInt32LE(k >>> 0, index * 8 + 4);
  });
  return bytes;
}

/** The number of a syscall on an architecture (for tests and documentation). */
export function syscallNumber(name: SyscallName, arch: SeccompArch): number {
  return SYSCALLS[name][arch];
}
